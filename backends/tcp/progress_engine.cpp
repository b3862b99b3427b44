// The progress engine (terms in progress_engine.h). One turn:
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
#include "backends/tcp/progress_engine.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <unordered_map>

#include <fmt/format.h>

#include "backends/tcp/frame.h"
#include "comm/log.h"

namespace dpt::tcp {

using net::Clock;

namespace {

constexpr size_t kStageBytes = 64 * 1024;     // per-peer staging buffer
constexpr size_t kDirectMinBytes = 16 * 1024;  // payload rest at least this: read directly
constexpr size_t kReadBudget = 8u << 20;       // bytes read from one peer per loop turn
constexpr size_t kWriteBudget = 8u << 20;      // bytes written to one peer per loop turn
constexpr int kMaxIov = 64;
constexpr Millis kExpiryCheck{100};
constexpr Millis kAbortFlush{1000};           // time to get abort frames out before closing

struct Op {
  bool is_send = false;
  int peer = -1;
  int64_t tag = 0;
  char* data = nullptr;
  size_t bytes = 0;
  std::shared_ptr<PromiseWork> work;  // null for the engine's own control frames
  Clock::time_point deadline;
  int64_t timeout_ms = 0;  // for messages
  unsigned char header[kHeaderBytes];
  size_t header_sent = 0;
  size_t done = 0;     // payload bytes written
  std::string owned;   // control frame payload (data points here)
};
using OpPtr = std::shared_ptr<Op>;

struct Unexpected {
  std::unique_ptr<char[]> data;
  size_t bytes = 0;
  bool complete = false;
};
using UnexpPtr = std::shared_ptr<Unexpected>;

enum class PeerState { open, departed, broken };

struct Peer {
  int rank = -1;
  net::Socket sock;
  PeerState state = PeerState::open;
  bool goodbye_queued = false;
  bool closing = false;  // communicator failed: flush control frames, then close
  std::deque<OpPtr> sendq;
  // receive state machine
  unsigned char hdr[kHeaderBytes];
  size_t hdr_got = 0;
  bool in_payload = false;
  bool paused = false;
  FrameHeader cur;
  uint64_t payload_got = 0;
  OpPtr cur_recv;      // direct destination
  UnexpPtr cur_unexp;  // buffered destination
  std::string cur_abort;
  std::unique_ptr<char[]> stage;
  size_t stage_begin = 0, stage_end = 0;
  std::unordered_map<int64_t, std::deque<OpPtr>> posted;
  std::unordered_map<int64_t, std::deque<UnexpPtr>> unexpected;
  // shared memory (null: the socket carries the frames)
  ShmChannel* shm = nullptr;
  bool eof_seen = false;  // shm peer: its socket closed; acted on once the ring is drained
  std::string eof_detail;
};

// Shared by the engine and every Work it hands out, so a Work waited on after its engine
// is gone finds `alive` false (and a valid eventfd) instead of a dangling engine.
struct DriveGate {
  std::mutex owner;                  // held by whoever runs turns: engine thread or driver
  std::atomic<bool> driving{false};  // a driver holds (or is about to take) `owner`
  bool enabled = false;              // TCP-only engine; fixed before the thread starts
  bool alive = true;                 // under owner; false once the engine thread ended
  ProgressEngine::Impl* impl = nullptr;
  int wake_fd = -1;                  // the engine's eventfd, closed with the last holder
  ~DriveGate() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
  // Makes the engine thread (and a driver) leave poll() and look at the inbox.
  void kick() const {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd, &one, sizeof one);
    (void)ignored;
  }
};

enum class DriveResult { drove, busy, not_possible };

// The engine's Work: wait() drives the engine on the waiting thread when it can.
class EngineWork : public PromiseWork {
 public:
  EngineWork(ErrorContext ctx, std::shared_ptr<DriveGate> gate) : PromiseWork(std::move(ctx)), gate_(std::move(gate)) {}
  void wait(Millis timeout) override;

 private:
  std::shared_ptr<DriveGate> gate_;
};

// The engine whose drive scope this thread is in (one at a time), and its depth.
thread_local ProgressEngine::Impl* tl_driver = nullptr;
thread_local int tl_drive_depth = 0;

}  // namespace

struct ProgressEngine::Impl {
  EngineConfig cfg;
  std::vector<Peer> peers;
  std::vector<ShmChannelPtr> channels;
  bool any_shm = false;
  bool shm_progress = false;  // bytes moved through a ring in this loop turn
  Clock::time_point spin_until;
  int wake_fd = -1;  // gate->wake_fd
  std::thread thread;
  std::shared_ptr<DriveGate> gate = std::make_shared<DriveGate>();
  // Threads in a drive scope or driving: while > 0 the engine thread polls only its
  // eventfd (the drivers read the sockets). Changed by drivers, read by the engine.
  std::atomic<int> drivers{0};

  // ---- shared with posting threads (under mu) ----
  std::mutex mu;
  std::condition_variable cv;
  std::vector<OpPtr> inbox;
  std::atomic<bool> wake_pending{false};
  // False while the engine spins (it looks at the inbox every turn anyway), so posters
  // skip the eventfd write. Set before the inbox is checked one last time (Dekker).
  std::atomic<bool> may_block{true};
  bool abort_requested = false;
  std::string abort_reason;
  bool abort_handled = false;
  bool shutdown_requested = false;
  Millis shutdown_grace{5000};
  bool exited = false;
  Failure failure_seen;  // copied from the engine thread's state by fail_communicator
  std::atomic<bool> failed_flag{false};
  std::unique_ptr<std::atomic<bool>[]> departed_flags;

  // ---- engine thread only ----
  bool failed = false;
  bool failed_by_abort = false;
  std::string fail_detail;
  Clock::time_point close_deadline;
  bool shutting_down = false;
  Clock::time_point shutdown_deadline;
  uint64_t unexpected_bytes = 0;
  Clock::time_point next_expiry = Clock::now() + kExpiryCheck;
  std::vector<pollfd> drive_fds;  // a driver's poll set (one driver at a time)
  std::vector<int> drive_fd_peer;

  std::atomic<uint64_t> frames_sent{0}, frames_received{0}, bytes_sent{0}, bytes_received{0};
  std::atomic<uint64_t> unexpected_frames{0}, unexpected_peak{0};
  std::atomic<uint64_t> completed_by_waiters{0};

  // ---- posting ----
  WorkPtr post(bool is_send, const Buffer& buf, int peer, int64_t tag, Millis timeout);
  void wake();

  // ---- engine ----
  void run();
  bool prepare_turn();  // steps 1-2 and closing; false once the engine should exit
  void build_fds(std::vector<pollfd>& fds, std::vector<int>& fd_peer, bool sockets);
  void handle_events(const std::vector<pollfd>& fds, const std::vector<int>& fd_peer);
  void on_poll_error(int err);
  void check_expiry();
  // ---- drivers (under gate->owner) ----
  DriveResult drive(const PromiseWork& w, Clock::time_point deadline);
  void hand_back();  // the last driver leaves: wake the engine thread if it has work
  void take_inbox();
  void route(const OpPtr& op);
  void match_recv(Peer& p, const OpPtr& op);
  bool flush(Peer& p);
  bool read_peer(Peer& p);
  bool on_header(Peer& p);
  void deliver(Peer& p, const char* src, size_t n);
  void finish_payload(Peer& p);
  void on_connection_lost(Peer& p, const std::string& detail);
  void on_goodbye(Peer& p);
  void fail_communicator(const std::string& detail, bool local_abort, int culprit);
  void start_shutdown();
  void expire_ops();
  void release_unexpected(size_t bytes);
  void resume_paused();
  void close_peer(Peer& p);
  bool has_pending_ops() const;
  bool shm_ops_pending() const;
  // ---- shared memory ----
  void ring_doorbell(Peer& p);
  void drain_doorbells(Peer& p);
  void check_shm_eof(Peer& p);
  int arm_sleep(int timeout_ms);

  // ---- errors ----
  ErrorContext ctx(const Op& op) const { return cfg.context(op.is_send ? "send" : "recv", op.peer); }
  std::string tag_text(const Op& op) const { return fmt::format("tag {}, {} bytes", op.tag, op.bytes); }
  void complete(const OpPtr& op) {
    if (!op->work) return;
    if (std::this_thread::get_id() != thread.get_id()) ++completed_by_waiters;
    op->work->complete();
  }
  template <class E> void fail(const OpPtr& op, const std::string& detail) {
    if (op->work) op->work->fail(std::make_exception_ptr(E(ctx(*op), detail + " (" + tag_text(*op) + ")")));
  }
  void fail_with_failure(const OpPtr& op) {
    if (failed_by_abort)
      fail<AbortedError>(op, fail_detail);
    else
      fail<PeerError>(op, fail_detail);
  }
  void fail_departed(const OpPtr& op) {
    fail<PeerError>(op, fmt::format("peer rank {} has shut down its communicator (it said goodbye), so this "
                                    "operation can never complete: did the ranks issue different operations?",
                                    op->peer));
  }
};

// =====================================================================================
// Posting (any thread)

WorkPtr ProgressEngine::Impl::post(bool is_send, const Buffer& buf, int peer, int64_t tag, Millis timeout) {
  if (timeout <= Millis(0)) timeout = cfg.op_timeout;
  const char* what = is_send ? "send" : "recv";
  if (peer < 0 || peer >= cfg.world || peer == cfg.rank)
    throw UsageError(cfg.context(what, peer), fmt::format("peer {} is not another rank in [0, {})", peer, cfg.world));
  if (!buf.device.is_cpu())
    throw UsageError(cfg.context(what, peer), "the tcp backend moves host memory only (got a " + buf.device.str() + " buffer)");
  auto op = std::make_shared<Op>();
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->data = static_cast<char*>(buf.data);
  op->bytes = buf.bytes();
  op->work = std::make_shared<EngineWork>(cfg.context(what, peer), gate);
  op->work->set_default_timeout(timeout);
  op->deadline = Clock::now() + timeout;
  op->timeout_ms = timeout.count();
  if (op->bytes > 0 && !op->data) throw UsageError(cfg.context(what, peer), "null buffer with a non-zero count");
  if (is_send && op->bytes > cfg.max_frame_bytes)
    throw UsageError(cfg.context(what, peer), fmt::format("message of {} bytes exceeds COMM_MAX_FRAME_BYTES={}", op->bytes,
                                                          cfg.max_frame_bytes));
  {
    std::lock_guard<std::mutex> lk(mu);
    if (shutdown_requested || exited)
      return std::make_shared<ReadyWork>(std::make_exception_ptr(
          AbortedError(cfg.context(what, peer), "the communicator is shutting down")));
    inbox.push_back(op);
  }
  // A thread in a drive scope takes the inbox itself when it next waits.
  if (tl_driver != this) wake();
  return op->work;
}

void ProgressEngine::Impl::wake() {
  if (!may_block.load(std::memory_order_seq_cst)) return;  // spinning: it will look
  if (wake_pending.exchange(true)) return;  // already rung and not yet answered
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd, &one, sizeof one);
  (void)ignored;
}

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
    auto now = Clock::now();
    const int expiry_ms = static_cast<int>(kExpiryCheck.count());
    int timeout_ms = quiet                      ? expiry_ms  // to see the drivers leave
                     : shutting_down || failed ? 10
                     : has_pending_ops()       ? expiry_ms
                                               : 1000;
    bool armed = false;
    if (any_shm) {
      if (shm_progress) spin_until = now + cfg.shm_spin;
      // Spin only while an op waits on a ring: with few cores, a spinning engine takes
      // the CPU from the threads that would produce the next message.
      if (now < spin_until && shm_ops_pending()) {
        timeout_ms = 0;
        if (!shm_progress) sched_yield();
      } else {
        timeout_ms = arm_sleep(timeout_ms);
        armed = true;
      }
    }
    own.unlock();  // a driver may run turns while this thread sleeps
    int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    const int poll_errno = errno;
    own.lock();
    if (armed) {
      for (Peer& p : peers)
        if (p.shm) {
          p.shm->in().disarm();
          p.shm->out().disarm_producer();
        }
      may_block.store(false, std::memory_order_relaxed);
      spin_until = Clock::now() + cfg.shm_spin;  // whatever woke us likely has a follow-up
    }
    if (rc < 0) on_poll_error(poll_errno);
    // A driver may have run meanwhile: the events can be stale, which is harmless
    // (reads and writes are non-blocking; closed peers are skipped).
    if (rc > 0) handle_events(fds, fd_peer);
    check_expiry();
  }
  // Whatever is still pending can no longer complete.
  fail_detail = failed ? fail_detail : "the communicator was shut down while this operation was pending";
  failed_by_abort = true;
  for (Peer& p : peers) {
    for (auto& [tag, q] : p.posted)
      for (auto& op : q) fail_with_failure(op);
    p.posted.clear();
    for (auto& op : p.sendq) fail_with_failure(op);
    p.sendq.clear();
    if (p.cur_recv) fail_with_failure(p.cur_recv);
    p.cur_recv.reset();
  }
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
  take_inbox();
  shm_progress = false;
  for (Peer& p : peers)
    if (p.sock.valid() && !p.sendq.empty()) flush(p);
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
      bool flushed = p.sendq.empty();
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
      if (!p.sendq.empty()) ev |= POLLOUT;
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
    if ((re & (POLLOUT | POLLERR)) && p.sock.valid() && !p.sendq.empty()) flush(p);
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
      if (p.sock.valid() && !p.sendq.empty()) flush(p);
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

bool ProgressEngine::Impl::shm_ops_pending() const {
  for (const Peer& p : peers)
    if (p.shm && p.sock.valid() && (!p.sendq.empty() || !p.posted.empty() || p.cur_recv)) return true;
  return false;
}

bool ProgressEngine::Impl::has_pending_ops() const {
  for (const Peer& p : peers)
    if (!p.sendq.empty() || !p.posted.empty() || p.cur_recv) return true;
  return false;
}

void ProgressEngine::Impl::take_inbox() {
  wake_pending.store(false);
  std::vector<OpPtr> ops;
  bool do_abort = false, do_shutdown = false;
  std::string reason;
  {
    std::lock_guard<std::mutex> lk(mu);
    ops.swap(inbox);
    if (abort_requested && !abort_handled) {
      do_abort = true;
      reason = abort_reason;
    }
    if (shutdown_requested && !shutting_down) {
      do_shutdown = true;
      shutdown_deadline = Clock::now() + shutdown_grace;
    }
  }
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

void ProgressEngine::Impl::route(const OpPtr& op) {
  Peer& p = peers[static_cast<size_t>(op->peer)];
  if (p.shm) shm_progress = true;  // a new op on a ring: its answer comes soon
  if (failed) return fail_with_failure(op);
  if (op->is_send) {
    if (p.state != PeerState::open || p.goodbye_queued || !p.sock.valid()) return fail_departed(op);
    encode_header(FrameHeader{FrameType::data, op->tag, op->bytes}, op->header);
    p.sendq.push_back(op);
    return;
  }
  match_recv(p, op);
}

void ProgressEngine::Impl::match_recv(Peer& p, const OpPtr& op) {
  // A frame that arrived first (and may still be arriving) is this receive's, in order.
  auto it = p.unexpected.find(op->tag);
  if (it != p.unexpected.end() && !it->second.empty()) {
    UnexpPtr u = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) p.unexpected.erase(it);
    bool arriving = !u->complete;  // then it is p.cur_unexp
    if (u->bytes != op->bytes) {
      fail<MismatchError>(op, fmt::format("peer rank {} sent {} bytes but this receive holds {}: did the ranks "
                                          "issue different operations (a collective mismatch)?",
                                          p.rank, u->bytes, op->bytes));
      if (arriving) p.cur_unexp.reset();  // rest of the frame is discarded
    } else if (!arriving) {
      if (u->bytes) std::memcpy(op->data, u->data.get(), u->bytes);
      complete(op);
    } else {
      // Switch the frame being read to the user's buffer: the rest goes there directly.
      if (p.payload_got) std::memcpy(op->data, u->data.get(), p.payload_got);
      p.cur_unexp.reset();
      p.cur_recv = op;
    }
    release_unexpected(u->bytes);
    return;
  }
  if (p.state != PeerState::open) {
    if (p.state == PeerState::departed) return fail_departed(op);
    return fail_with_failure(op);
  }
  p.posted[op->tag].push_back(op);
  if (p.paused && p.cur.tag == op->tag && p.cur.type == FrameType::data) {
    p.paused = false;
    if (on_header(p)) read_peer(p);
  }
}

// =====================================================================================
// Writing

bool ProgressEngine::Impl::flush(Peer& p) {
  size_t written = 0;
  while (!p.sendq.empty() && written < kWriteBudget) {
    iovec iov[kMaxIov];
    int n = 0;
    for (auto& op : p.sendq) {
      if (n + 2 > kMaxIov) break;
      if (op->header_sent < kHeaderBytes) iov[n++] = {op->header + op->header_sent, kHeaderBytes - op->header_sent};
      if (op->done < op->bytes) iov[n++] = {op->data + op->done, op->bytes - op->done};
    }
    ssize_t w;
    if (p.shm) {
      w = static_cast<ssize_t>(p.shm->out().write(iov, n));
      if (w == 0) return true;  // ring full: the consumer's doorbell or the spin resumes us
      shm_progress = true;
      if (p.shm->out().consumer_needs_wake()) ring_doorbell(p);
    } else {
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = static_cast<size_t>(n);
      w = ::sendmsg(p.sock.fd(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      int err = errno;
      on_connection_lost(p, fmt::format("connection to peer rank {} lost while sending ({}): did it exit or crash?",
                                        p.rank, net::errno_string(err)));
      return false;
    }
    written += static_cast<size_t>(w);
    bytes_sent += static_cast<uint64_t>(w);
    size_t left = static_cast<size_t>(w);
    while (!p.sendq.empty()) {
      Op& op = *p.sendq.front();
      size_t take = std::min(left, kHeaderBytes - op.header_sent);
      op.header_sent += take;
      left -= take;
      take = std::min(left, op.bytes - op.done);
      op.done += take;
      left -= take;
      if (op.header_sent < kHeaderBytes || op.done < op.bytes) break;
      OpPtr done = std::move(p.sendq.front());
      p.sendq.pop_front();
      ++frames_sent;
      complete(done);
    }
  }
  return true;
}

// =====================================================================================
// Reading

bool ProgressEngine::Impl::read_peer(Peer& p) {
  if (!p.stage) p.stage = std::make_unique<char[]>(kStageBytes);
  size_t budget = kReadBudget;
  for (;;) {
    // 1. Bytes already staged.
    while (p.stage_begin < p.stage_end) {
      if (p.paused) return true;
      size_t avail = p.stage_end - p.stage_begin;
      if (!p.in_payload) {
        size_t n = std::min(avail, kHeaderBytes - p.hdr_got);
        std::memcpy(p.hdr + p.hdr_got, p.stage.get() + p.stage_begin, n);
        p.hdr_got += n;
        p.stage_begin += n;
        if (p.hdr_got == kHeaderBytes && !on_header(p)) return false;
      } else {
        size_t n = static_cast<size_t>(std::min<uint64_t>(avail, p.cur.length - p.payload_got));
        deliver(p, p.stage.get() + p.stage_begin, n);
        p.stage_begin += n;
        if (p.payload_got == p.cur.length) finish_payload(p);
      }
      if (!p.sock.valid()) return false;
    }
    if (p.paused || !p.sock.valid() || p.closing) return p.sock.valid();
    if (budget == 0) return true;
    // 2. More from the socket: big payload rests straight into their destination.
    char* dst = p.stage.get();
    size_t want = kStageBytes;
    bool direct = false;
    uint64_t rest = p.in_payload ? p.cur.length - p.payload_got : 0;
    // From a ring every payload goes straight to its destination: one copy, no staging.
    if (rest >= (p.shm ? 1 : kDirectMinBytes) && (p.cur_recv || p.cur_unexp)) {
      dst = (p.cur_recv ? p.cur_recv->data : p.cur_unexp->data.get()) + p.payload_got;
      want = static_cast<size_t>(rest);
      direct = true;
    }
    ssize_t r;
    if (p.shm) {
      r = static_cast<ssize_t>(p.shm->in().read(dst, want));
      if (r == 0) return true;  // empty; the end of the peer is seen on its socket
      shm_progress = true;
      if (p.shm->in().producer_needs_wake()) ring_doorbell(p);
    } else {
      r = ::recv(p.sock.fd(), dst, want, MSG_DONTWAIT);
    }
    if (r > 0) {
      size_t got = static_cast<size_t>(r);
      budget = got >= budget ? 0 : budget - got;
      bytes_received += got;
      if (direct) {
        p.payload_got += got;
        if (p.payload_got == p.cur.length) finish_payload(p);
      } else {
        p.stage_begin = 0;
        p.stage_end = got;
      }
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (r == 0) {
      if (p.state == PeerState::departed || shutting_down) {
        close_peer(p);  // the expected end after a goodbye
        return false;
      }
      bool mid = p.in_payload || p.hdr_got > 0;
      on_connection_lost(p, fmt::format("connection closed by peer rank {}{}: did it exit or crash?", p.rank,
                                        mid ? " in the middle of a frame" : ""));
      return false;
    }
    int err = errno;
    on_connection_lost(p, fmt::format("connection to peer rank {} failed ({}): did it exit or crash?", p.rank,
                                      net::errno_string(err)));
    return false;
  }
}

bool ProgressEngine::Impl::on_header(Peer& p) {
  if (!p.paused && !p.in_payload) {
    try {
      p.cur = decode_header(p.hdr, cfg.max_frame_bytes);
    } catch (const FrameError& e) {
      on_connection_lost(p, fmt::format("invalid frame from peer rank {}: {}; dropping the connection", p.rank, e.what()));
      return false;
    }
  }
  p.paused = false;
  p.payload_got = 0;
  switch (p.cur.type) {
    case FrameType::data: {
      auto it = p.posted.find(p.cur.tag);
      if (it != p.posted.end() && !it->second.empty()) {
        OpPtr op = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) p.posted.erase(it);
        if (op->bytes != p.cur.length) {
          // Never write past the posted buffer: the frame is read and dropped.
          fail<MismatchError>(op, fmt::format("peer rank {} sent {} bytes with tag {} but the posted receive holds {} "
                                              "bytes: did the ranks issue different operations (a collective mismatch)?",
                                              p.rank, p.cur.length, p.cur.tag, op->bytes));
        } else {
          p.cur_recv = std::move(op);
        }
      } else {
        if (unexpected_bytes + p.cur.length > cfg.max_unexpected_bytes) {
          p.paused = true;  // until a matching receive is posted or the budget frees up
          return true;
        }
        auto u = std::make_shared<Unexpected>();
        u->bytes = static_cast<size_t>(p.cur.length);
        if (u->bytes) u->data = std::make_unique<char[]>(u->bytes);
        unexpected_bytes += u->bytes;
        ++unexpected_frames;
        if (unexpected_bytes > unexpected_peak) unexpected_peak = unexpected_bytes;
        p.unexpected[p.cur.tag].push_back(u);
        p.cur_unexp = std::move(u);
      }
      break;
    }
    case FrameType::goodbye:
      p.hdr_got = 0;
      ++frames_received;
      on_goodbye(p);
      return true;
    case FrameType::abort:
      p.cur_abort.clear();
      break;
  }
  p.in_payload = true;
  if (p.cur.length == 0) finish_payload(p);
  return p.sock.valid();
}

void ProgressEngine::Impl::deliver(Peer& p, const char* src, size_t n) {
  if (p.cur_recv)
    std::memcpy(p.cur_recv->data + p.payload_got, src, n);
  else if (p.cur_unexp)
    std::memcpy(p.cur_unexp->data.get() + p.payload_got, src, n);
  else if (p.cur.type == FrameType::abort)
    p.cur_abort.append(src, n);
  // else: a mismatched frame being dropped
  p.payload_got += n;
}

void ProgressEngine::Impl::finish_payload(Peer& p) {
  ++frames_received;
  p.in_payload = false;
  p.hdr_got = 0;
  if (p.cur_recv) {
    OpPtr op = std::move(p.cur_recv);
    p.cur_recv.reset();
    complete(op);
  } else if (p.cur_unexp) {
    p.cur_unexp->complete = true;
    p.cur_unexp.reset();
  } else if (p.cur.type == FrameType::abort) {
    std::string reason = std::move(p.cur_abort);
    p.state = PeerState::broken;
    close_peer(p);
    fail_communicator(fmt::format("rank {} failed its communicator: {}", p.rank, reason), false, p.rank);
  }
}

// =====================================================================================
// Shared memory: doorbells, sleeping, and a peer's end

void ProgressEngine::Impl::ring_doorbell(Peer& p) {
  if (!p.sock.valid()) return;
  // One byte; when the socket buffer is full the peer has wake-ups pending anyway, and
  // a closed peer is noticed through its own end of the socket.
  const char b = 1;
  ssize_t ignored = ::send(p.sock.fd(), &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)ignored;
}

void ProgressEngine::Impl::drain_doorbells(Peer& p) {
  char buf[256];
  for (;;) {
    ssize_t r = ::recv(p.sock.fd(), buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // Closed or reset. The peer wrote everything it meant to (its goodbye included)
    // into the ring before closing, so the ring is drained before acting on it.
    p.eof_seen = true;
    p.eof_detail = r == 0 ? "connection closed" : "connection failed (" + net::errno_string(errno) + ")";
    return;
  }
}

void ProgressEngine::Impl::check_shm_eof(Peer& p) {
  if (!p.sock.valid()) return;
  if (p.closing) return close_peer(p);
  if (p.paused || !p.shm->in().empty()) return;  // frames still to read first
  if (p.state == PeerState::departed || shutting_down) return close_peer(p);
  const bool mid = p.in_payload || p.hdr_got > 0;
  on_connection_lost(p, fmt::format("{} by peer rank {}{}: did it exit or crash?", p.eof_detail, p.rank,
                                    mid ? " in the middle of a frame" : ""));
}

// Before blocking in poll(): ask every ring's other side for a doorbell, then look once
// more; returns 0 (do not block) when something arrived meanwhile.
int ProgressEngine::Impl::arm_sleep(int timeout_ms) {
  may_block.store(true, std::memory_order_seq_cst);
  {
    std::lock_guard<std::mutex> lk(mu);
    if (!inbox.empty() || (abort_requested && !abort_handled) || (shutdown_requested && !shutting_down)) return 0;
  }
  for (Peer& p : peers) {
    if (!p.shm || !p.sock.valid() || p.closing) continue;
    if (!p.paused && p.shm->in().arm_consumer_sleep()) return 0;
    if (!p.sendq.empty() && p.shm->out().arm_producer_wait()) return 0;
  }
  return timeout_ms;
}

// =====================================================================================
// Failures, goodbyes, shutdown

void ProgressEngine::Impl::close_peer(Peer& p) {
  if (!p.sock.valid()) return;
  // Half-close first and drop what is already readable, so the close sends FIN rather
  // than RST and the peer reads everything we sent (the goodbye) before seeing EOF.
  ::shutdown(p.sock.fd(), SHUT_WR);
  char buf[4096];
  while (::recv(p.sock.fd(), buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
  p.sock.close();
  p.paused = false;
}

void ProgressEngine::Impl::on_connection_lost(Peer& p, const std::string& detail) {
  if (shutting_down || p.state == PeerState::departed || failed) {
    // Expected (both sides closing) or already reported: quietly forget the peer.
    p.sock.close();
    for (auto& op : p.sendq) shutting_down ? fail_departed(op) : fail_with_failure(op);
    p.sendq.clear();
    if (p.state == PeerState::open) p.state = PeerState::broken;
    return;
  }
  p.state = PeerState::broken;
  p.sock.close();
  fail_communicator(detail, false, p.rank);
}

void ProgressEngine::Impl::on_goodbye(Peer& p) {
  p.state = PeerState::departed;
  departed_flags[size_t(p.rank)].store(true, std::memory_order_release);
  // Its frames that arrived before the goodbye stay receivable (unexpected queue);
  // everything else waiting on it can never complete.
  for (auto& [tag, q] : p.posted)
    for (auto& op : q) fail_departed(op);
  p.posted.clear();
  for (auto& op : p.sendq)
    if (op->header_sent == 0) fail_departed(op);
  std::erase_if(p.sendq, [](const OpPtr& op) { return op->header_sent == 0; });
  log::debug("tcp engine: peer rank {} said goodbye", p.rank);
}

void ProgressEngine::Impl::fail_communicator(const std::string& detail, bool local_abort, int culprit) {
  if (failed) return;
  failed = true;
  failed_by_abort = local_abort;
  fail_detail = detail;
  {
    std::lock_guard<std::mutex> lk(mu);
    failure_seen = Failure{local_abort, culprit, detail};
  }
  failed_flag.store(true, std::memory_order_release);
  close_deadline = Clock::now() + kAbortFlush;
  size_t failed_ops = 0;
  std::string reason = detail.size() > kMaxAbortReason ? detail.substr(0, kMaxAbortReason) : detail;
  for (Peer& p : peers) {
    for (auto& [tag, q] : p.posted)
      for (auto& op : q) {
        fail_with_failure(op);
        ++failed_ops;
      }
    p.posted.clear();
    if (p.cur_recv) {
      fail_with_failure(p.cur_recv);
      ++failed_ops;
      p.cur_recv.reset();
    }
    p.unexpected.clear();
    p.cur_unexp.reset();
    bool partial = !p.sendq.empty() && p.sendq.front()->header_sent > 0;
    for (auto& op : p.sendq)
      if (op->work) {
        fail_with_failure(op);
        ++failed_ops;
      }
    p.sendq.clear();
    p.paused = false;
    p.closing = true;
    if (!p.sock.valid() || p.rank == culprit) continue;
    if (partial || p.state != PeerState::open) {
      close_peer(p);  // a half-written frame: the stream cannot carry another one
      continue;
    }
    // Tell the peer, so it fails now instead of at its timeout.
    auto op = std::make_shared<Op>();
    op->is_send = true;
    op->peer = p.rank;
    op->owned = reason;
    op->data = op->owned.data();
    op->bytes = op->owned.size();
    encode_header(FrameHeader{FrameType::abort, 0, op->bytes}, op->header);
    p.sendq.push_back(op);
  }
  unexpected_bytes = 0;
  if (failed_ops > 0 && !local_abort)
    log::warn("tcp: {} ({} pending operation(s) failed)", detail, failed_ops);
  else
    log::debug("tcp: communicator failed: {}", detail);
}

void ProgressEngine::Impl::start_shutdown() {
  shutting_down = true;
  // Receives still posted belong to a caller that is gone; release their buffers now.
  for (Peer& p : peers) {
    for (auto& [tag, q] : p.posted)
      for (auto& op : q) fail<AbortedError>(op, "the communicator was destroyed while this receive was pending");
    p.posted.clear();
    if (p.cur_recv) {
      fail<AbortedError>(p.cur_recv, "the communicator was destroyed while this receive was arriving");
      p.cur_recv.reset();  // the rest of the frame is dropped
    }
    if (failed || !p.sock.valid() || p.state != PeerState::open || p.goodbye_queued) continue;
    auto op = std::make_shared<Op>();
    op->is_send = true;
    op->peer = p.rank;
    encode_header(FrameHeader{FrameType::goodbye, 0, 0}, op->header);
    p.sendq.push_back(op);
    p.goodbye_queued = true;
  }
}

void ProgressEngine::Impl::expire_ops() {
  auto now = Clock::now();
  for (Peer& p : peers) {
    for (auto it = p.posted.begin(); it != p.posted.end();) {
      auto& q = it->second;
      while (!q.empty() && q.front()->deadline <= now) {
        fail<TimeoutError>(q.front(), fmt::format("no message from peer rank {} within {} ms (is it stuck or dead, or "
                                                  "did the ranks issue different operations?)", p.rank, q.front()->timeout_ms));
        q.pop_front();
      }
      it = q.empty() ? p.posted.erase(it) : std::next(it);
    }
    if (p.cur_recv && p.cur_recv->deadline <= now) {
      OpPtr op = std::move(p.cur_recv);
      const int64_t ms = op->timeout_ms;
      p.cur_recv.reset();
      fail<TimeoutError>(op, fmt::format("peer rank {} stopped sending in the middle of this message for {} ms "
                                         "(stuck, or stopped with SIGSTOP?)", p.rank, ms));
      on_connection_lost(p, fmt::format("peer rank {} stalled in the middle of a frame for {} ms", p.rank, ms));
      continue;
    }
    if (!p.sendq.empty() && p.sendq.front()->work && p.sendq.front()->deadline <= now) {
      OpPtr op = p.sendq.front();
      const int64_t ms = op->timeout_ms;
      if (op->header_sent > 0) {
        p.sendq.pop_front();
        fail<TimeoutError>(op, fmt::format("peer rank {} stopped reading in the middle of this message for {} ms "
                                           "(stuck, or stopped with SIGSTOP?)", p.rank, ms));
        on_connection_lost(p, fmt::format("peer rank {} stopped reading for {} ms", p.rank, ms));
        continue;
      }
    }
    // Sends not started: drop those past their deadline (order of the rest is kept).
    std::erase_if(p.sendq, [&](const OpPtr& op) {
      if (!op->work || op->header_sent > 0 || op->deadline > now) return false;
      fail<TimeoutError>(op, fmt::format("could not send to peer rank {} within {} ms: it is not reading (stuck?)",
                                         p.rank, op->timeout_ms));
      return true;
    });
  }
}

void ProgressEngine::Impl::release_unexpected(size_t bytes) {
  unexpected_bytes -= std::min<uint64_t>(unexpected_bytes, bytes);
  resume_paused();
}

void ProgressEngine::Impl::resume_paused() {
  for (Peer& p : peers) {
    if (!p.paused || !p.sock.valid()) continue;
    bool fits = unexpected_bytes + p.cur.length <= cfg.max_unexpected_bytes;
    auto it = p.posted.find(p.cur.tag);
    bool matched = it != p.posted.end() && !it->second.empty();
    if (!fits && !matched) continue;
    p.paused = false;
    if (on_header(p)) read_peer(p);
  }
}

// =====================================================================================
// Public face

ProgressEngine::ProgressEngine(EngineConfig cfg, std::vector<net::Socket> sockets, std::vector<ShmChannelPtr> shm)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cfg = std::move(cfg);
  m.channels = std::move(shm);
  m.channels.resize(static_cast<size_t>(m.cfg.world));
  m.peers.resize(static_cast<size_t>(m.cfg.world));
  m.departed_flags = std::make_unique<std::atomic<bool>[]>(size_t(m.cfg.world));
  for (int r = 0; r < m.cfg.world; ++r) {
    Peer& p = m.peers[static_cast<size_t>(r)];
    p.rank = r;
    if (r < static_cast<int>(sockets.size()) && sockets[r].valid()) {
      p.sock = std::move(sockets[r]);
      net::set_nonblocking(p.sock.fd(), true);
      p.shm = m.channels[static_cast<size_t>(r)].get();
      m.any_shm |= p.shm != nullptr;
    } else if (r != m.cfg.rank) {
      p.state = PeerState::broken;
    }
  }
  m.wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (m.wake_fd < 0) throw net::SocketError("eventfd: " + net::errno_string(errno), errno);
  m.gate->wake_fd = m.wake_fd;
  m.gate->impl = &m;
  // Rings need the engine thread's spin-then-sleep logic; TCP sockets need only poll().
  m.gate->enabled = !m.any_shm && m.cfg.waiters_drive;
  m.thread = std::thread([this] { impl_->run(); });
}

ProgressEngine::~ProgressEngine() { shutdown(Millis(5000)); }  // the gate closes the eventfd

void ProgressEngine::begin_drive() {
  Impl* m = impl_.get();
  if (!m->gate->enabled) return;
  if (tl_driver == m) {
    ++tl_drive_depth;
    return;
  }
  if (tl_driver) return;  // in another engine's scope: this one is driven only by waits
  tl_driver = m;
  tl_drive_depth = 1;
  m->drivers.fetch_add(1, std::memory_order_acq_rel);
}

void ProgressEngine::end_drive() {
  Impl* m = impl_.get();
  if (tl_driver != m || --tl_drive_depth > 0) return;
  tl_driver = nullptr;
  if (m->drivers.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::lock_guard<std::mutex> own(m->gate->owner);
  if (m->gate->alive) m->hand_back();
}

WorkPtr ProgressEngine::isend(const Buffer& buf, int peer, int64_t tag, Millis timeout) {
  return impl_->post(true, buf, peer, tag, timeout);
}
WorkPtr ProgressEngine::irecv(const Buffer& buf, int peer, int64_t tag, Millis timeout) {
  return impl_->post(false, buf, peer, tag, timeout);
}

void ProgressEngine::abort(const std::string& reason) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (m.exited || m.abort_requested) return;
    m.abort_requested = true;
    m.abort_reason = reason;
  }
  m.wake();
  if (std::this_thread::get_id() == m.thread.get_id()) return;  // from a completion callback
  std::unique_lock<std::mutex> lk(m.mu);
  m.cv.wait(lk, [&] { return m.abort_handled || m.exited; });
}

void ProgressEngine::shutdown(Millis grace) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (!m.shutdown_requested) {
      m.shutdown_requested = true;
      m.shutdown_grace = grace;
    }
  }
  m.wake();
  if (m.thread.joinable() && std::this_thread::get_id() != m.thread.get_id()) m.thread.join();
}

bool ProgressEngine::has_failed() const { return impl_->failed_flag.load(std::memory_order_acquire); }

ProgressEngine::Failure ProgressEngine::failure() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->failure_seen;
}

bool ProgressEngine::departed(int peer) const {
  return peer >= 0 && peer < impl_->cfg.world && impl_->departed_flags[size_t(peer)].load(std::memory_order_acquire);
}

ProgressEngine::Stats ProgressEngine::stats() const {
  const Impl& m = *impl_;
  int shm_peers = 0;
  for (const auto& ch : m.channels) shm_peers += ch != nullptr;
  return Stats{m.frames_sent.load(), m.frames_received.load(), m.bytes_sent.load(), m.bytes_received.load(),
               m.unexpected_frames.load(), m.unexpected_peak.load(), m.completed_by_waiters.load(), shm_peers};
}

}  // namespace dpt::tcp
