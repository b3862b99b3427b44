// The engine's loop (terms in progress_engine.h and engine_impl.h). One turn:
//   1. take newly posted ops from the inbox and route them (send queue, posted
//      receives, or an already buffered unexpected frame);
//   2. write what the send queues hold (sendmsg, many frames per call);
//   3. poll() every connection: POLLIN unless the peer is paused, POLLOUT when its send
//      queue is not empty, plus the eventfd that posters ring;
//   4. read: headers and small payloads through the peer's staging buffer, large
//      payloads straight into their destination;
//   5. every 100 ms, fail ops whose deadline passed.
// Turns run on the engine thread, or on a driver (a thread waiting on one of this
// engine's Works), never on both at once: whoever holds DriveGate::owner owns the
// state. The engine thread lets go of it while it sleeps in poll().
// Sends and receives of one connection are handled in the same turn, so two
// ranks sending large messages to each other at once both make progress (no deadlock).
#include <poll.h>

#include <cerrno>

#include "backends/tcp/engine_impl.h"
#include "comm/net/log.h"

namespace dpt::tcp {

using namespace engine;

namespace engine {
thread_local ProgressEngine::Impl* tl_driver = nullptr;
thread_local int tl_drive_depth = 0;
}  // namespace engine

// =====================================================================================
// The loop

void ProgressEngine::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<int> fd_peer;
  std::unique_lock<std::mutex> own(gate->owner);
  for (;;) {
    if (!prepare_turn()) break;
    // While a driver runs turns it reads the sockets; watching them here as well would
    // wake this thread for every message the driver handles.
    const bool quiet = drivers.load(std::memory_order_acquire) > 0 && !failed && !shutting_down;
    build_fds(fds, fd_peer, !quiet);
    const int expiry_ms = static_cast<int>(kExpiryCheck.count());
    int timeout_ms = quiet                      ? expiry_ms  // to see the drivers leave
                     : shutting_down || failed ? 10
                     : has_pending_ops()       ? expiry_ms
                                               : 1000;
    bool armed = false;
    if (any_shm) timeout_ms = shm_poll_timeout(Clock::now(), timeout_ms, armed);
    own.unlock();  // a driver may run turns while this thread sleeps
    int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    const int poll_errno = errno;
    own.lock();
    if (armed) disarm_sleep();
    if (rc < 0) on_poll_error(poll_errno);
    // A driver may have run meanwhile: the events can be stale, which is harmless
    // (reads and writes are non-blocking; closed peers are skipped).
    if (rc > 0) handle_events(fds, fd_peer);
    check_expiry();
  }
  fail_leftovers();
  std::vector<OpPtr> late;
  {
    std::lock_guard<std::mutex> lk(mu);
    exited = true;
    late.swap(inbox);
  }
  for (auto& op : late) fail_with_failure(op);
  gate->alive = false;
  cv.notify_all();
}

bool ProgressEngine::Impl::prepare_turn() {
  check_shm_notices();
  take_inbox();
  shm_progress = false;
  for (Peer& p : peers)
    if (p.sock.valid() && has_output(p)) flush(p);
  if (any_shm)
    for (Peer& p : peers) {
      if (!p.shm || !p.sock.valid()) continue;
      if (!p.paused && !p.closing && !p.shm->in().empty()) read_peer(p);
      if (p.eof_seen) check_shm_eof(p);
    }
  if (shutting_down || failed) {
    // Close connections whose control frames are out (or that ran out of time).
    const auto now = Clock::now();
    for (Peer& p : peers) {
      if (!p.sock.valid()) continue;
      bool flushed = !has_output(p);
      if (failed && p.closing && (flushed || now >= close_deadline)) close_peer(p);
      if (shutting_down && (flushed || now >= shutdown_deadline) && (p.goodbye_queued || p.state != PeerState::open))
        close_peer(p);
    }
    bool any_open = false;
    for (const Peer& p : peers) any_open |= p.sock.valid();
    if (shutting_down && !any_open) return false;
  }
  return true;
}

void ProgressEngine::Impl::build_fds(std::vector<pollfd>& fds, std::vector<int>& fd_peer, bool sockets) {
  fds.clear();
  fd_peer.clear();
  fds.push_back({wake_fd, POLLIN, 0});
  if (!sockets) return;
  for (Peer& p : peers) {
    if (!p.sock.valid()) continue;
    short ev = 0;
    if (p.shm) {
      if (p.eof_seen) continue;
      ev = POLLIN;  // doorbells and the close; frames come through the ring
    } else {
      if (!p.paused && !p.closing) ev |= POLLIN;
      if (has_output(p)) ev |= POLLOUT;
    }
    fds.push_back({p.sock.fd(), ev, 0});
    fd_peer.push_back(p.rank);
  }
}

void ProgressEngine::Impl::handle_events(const std::vector<pollfd>& fds, const std::vector<int>& fd_peer) {
  if (fds[0].revents & POLLIN) {
    uint64_t v;
    ssize_t ignored = ::read(wake_fd, &v, sizeof v);
    (void)ignored;
  }
  for (size_t i = 1; i < fds.size(); ++i) {
    Peer& p = peers[static_cast<size_t>(fd_peer[i - 1])];
    short re = fds[i].revents;
    if (!re || !p.sock.valid()) continue;
    if (p.shm) {
      drain_doorbells(p);
      if (!p.paused && !p.closing) read_peer(p);
      if (p.eof_seen) check_shm_eof(p);
      continue;
    }
    if ((re & (POLLIN | POLLHUP | POLLERR)) && !p.closing) {
      if (!read_peer(p)) continue;
    }
    if ((re & (POLLOUT | POLLERR)) && p.sock.valid() && has_output(p)) flush(p);
  }
}

void ProgressEngine::Impl::on_poll_error(int err) {
  if (err == EINTR) return;
  log::error("tcp engine: poll failed: {}", net::errno_string(err));
  fail_communicator("internal error: poll failed: " + net::errno_string(err), false, -1);
}

void ProgressEngine::Impl::check_expiry() {
  const auto now = Clock::now();
  if (now < next_expiry) return;
  expire_ops();
  next_expiry = now + kExpiryCheck;
}

void ProgressEngine::Impl::take_inbox() {
  wake_pending.store(false);
  std::vector<OpPtr> ops;
  std::vector<Arrival> arrived;
  bool do_abort = false, do_shutdown = false;
  std::string reason;
  {
    std::lock_guard<std::mutex> lk(mu);
    ops.swap(inbox);
    arrived.swap(arrivals);
    if (abort_requested && !abort_handled) {
      do_abort = true;
      reason = abort_reason;
    }
    if (shutdown_requested && !shutting_down) {
      do_shutdown = true;
      shutdown_deadline = Clock::now() + shutdown_grace;
    }
  }
  for (auto& a : arrived) take_arrival(a);
  for (auto& op : ops) route(op);
  if (do_abort) {
    fail_communicator("communicator aborted: " + reason, true, -1);
    {
      std::lock_guard<std::mutex> lk(mu);
      abort_handled = true;
    }
    cv.notify_all();
  }
  if (do_shutdown) start_shutdown();
}

bool ProgressEngine::Impl::has_pending_ops() const {
  for (const Peer& p : peers)
    if (has_output(p) || !p.posted.empty() || p.cur_recv) return true;
  return false;
}

// =====================================================================================
// Drivers

// Runs turns on the calling thread until `w` is done, the deadline passes, or the
// communicator fails or shuts down (the engine thread then closes the connections).
DriveResult ProgressEngine::Impl::drive(const PromiseWork& w, Clock::time_point deadline) {
  if (failed || shutting_down) return DriveResult::not_possible;
  const bool scoped = tl_driver == this;
  if (!scoped) drivers.fetch_add(1, std::memory_order_acq_rel);
  for (;;) {
    take_inbox();
    for (Peer& p : peers)
      if (p.sock.valid() && has_output(p)) flush(p);
    if (w.done() || failed || shutting_down) break;
    const auto now = Clock::now();
    if (now >= deadline) break;
    build_fds(drive_fds, drive_fd_peer, true);
    const auto wait = std::min(deadline, next_expiry) - now;
    const int timeout_ms = static_cast<int>(std::chrono::ceil<Millis>(wait).count());
    int rc = ::poll(drive_fds.data(), drive_fds.size(), std::max(timeout_ms, 0));
    if (rc < 0) on_poll_error(errno);
    if (rc > 0) handle_events(drive_fds, drive_fd_peer);
    check_expiry();
    if (w.done()) break;
  }
  if (!scoped && drivers.fetch_sub(1, std::memory_order_acq_rel) == 1) hand_back();
  // This driver may have consumed a ring meant for ops it did not take: ring again, or
  // later posts would skip the eventfd (wake_pending) and wait for a timeout.
  else if (wake_pending.load()) gate->kick();
  return DriveResult::drove;
}

void ProgressEngine::Impl::hand_back() {
  bool work = has_pending_ops() || failed || shutting_down;
  if (!work) {
    std::lock_guard<std::mutex> lk(mu);
    work = !inbox.empty() || (abort_requested && !abort_handled) || (shutdown_requested && !shutting_down);
  }
  if (work) gate->kick();
}

void EngineWork::wait(Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  constexpr Millis kSlice{2};  // how soon a waiter takes over from a driver that left
  while (!done()) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    DriveResult r = DriveResult::not_possible;
    if (gate_->enabled) {
      if (gate_->driving.exchange(true, std::memory_order_acquire)) {
        r = DriveResult::busy;
      } else {
        {
          std::lock_guard<std::mutex> own(gate_->owner);
          if (gate_->alive) r = gate_->impl->drive(*this, deadline);
        }
        gate_->driving.store(false, std::memory_order_release);
      }
    }
    if (r == DriveResult::drove) continue;
    // Someone else moves the bytes: make sure it looks at the inbox (a scoped thread's
    // posts did not ring), then sleep on the completion.
    if (gate_->enabled) gate_->kick();
    const auto left = std::chrono::duration_cast<Millis>(deadline - now);
    if (r == DriveResult::not_possible) break;
    if (wait_until_done(std::min(left, kSlice))) break;
  }
  const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  if (!wait_until_done(std::max(left, Millis(0)))) throw_timeout(timeout);
  rethrow_if_failed();
}

}  // namespace dpt::tcp
