// Shared-memory peers in the progress engine (terms in progress_engine.h; the rings are
// shm_ring.h, the channel shm_channel.h):
//   doorbell  - one byte on the peer's socket, sent when the other side of a ring armed
//               its sleep flag (consumer waiting for data, producer waiting for room).
//   spin      - while an op waits on a ring, the engine thread polls without blocking
//               (sched_yield between turns) until EngineConfig::shm_spin has passed since
//               bytes last moved; then it arms the rings' sleep flags, looks once more,
//               and blocks in poll() until a doorbell, a post, or its timeout.
//   ring EOF  - the peer's socket closed: acted on only once its ring is drained (it
//               wrote its goodbye into the ring before closing).
//   notices   - a same-host peer is connected only once the pair first talks
//               (connector.h), so a failure or a clean end must also reach peers with
//               no socket: a failing rank writes its rank into their inbox headers
//               (ShmChannel::tell_failed; read every turn, so within the 100 ms a waiting
//               engine sleeps at most), and a rank shutting down sets the goodbye flag
//               of its ring to each of them (read when an op for that peer is routed and
//               at each expiry check).
#include <sched.h>
#include <sys/socket.h>

#include <cerrno>

#include "backends/tcp/engine_impl.h"

namespace dpt::tcp {

using namespace engine;

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
  // A goodbye given as a flag (a ring the peer never wrote): its clean end.
  if (p.state == PeerState::open && p.shm->in().goodbye_said()) on_goodbye(p);
  if (p.state == PeerState::departed || shutting_down) return close_peer(p);
  const bool mid = p.in_payload || p.hdr_got > 0;
  on_connection_lost(p, fmt::format("{} by peer rank {}{}: did it exit or crash?", p.eof_detail, p.rank,
                                    mid ? " in the middle of a frame" : ""));
}

void ProgressEngine::Impl::check_shm_notices() {
  if (!own_inbox || failed) return;
  const int by = own_inbox->failed_by();
  if (by < 0 || by >= cfg.world || by == cfg.rank) return;
  fail_communicator(fmt::format("rank {} failed its communicator (told through shared memory: it had no connection "
                                "to this rank)",
                                by),
                    false, by);
}

bool ProgressEngine::Impl::unconnected_goodbye(Peer& p) {
  if (!p.unconnected || !p.shm || p.state != PeerState::open || !p.shm->in().goodbye_said()) return false;
  p.unconnected = false;  // a dial under way, or the watch's verdict, is ignored when it comes
  on_goodbye(p);
  return true;
}

void ProgressEngine::Impl::tell_unconnected_shm_peers(int culprit) {
  for (Peer& p : peers)
    if (p.shm && !p.sock.valid() && p.rank != culprit) p.shm->tell_failed(cfg.rank);
}

bool ProgressEngine::Impl::shm_ops_pending() const {
  for (const Peer& p : peers)
    if (p.shm && p.sock.valid() && (!p.sendq.empty() || !p.posted.empty() || p.cur_recv)) return true;
  return false;
}

int ProgressEngine::Impl::shm_poll_timeout(Clock::time_point now, int timeout_ms, bool& armed) {
  if (shm_progress) spin_until = now + cfg.shm_spin;
  // Spin only while an op waits on a ring: with few cores, a spinning engine takes
  // the CPU from the threads that would produce the next message.
  if (now < spin_until && shm_ops_pending()) {
    if (!shm_progress) sched_yield();
    return 0;
  }
  armed = true;
  return arm_sleep(timeout_ms);
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

void ProgressEngine::Impl::disarm_sleep() {
  for (Peer& p : peers)
    if (p.shm) {
      p.shm->in().disarm();
      p.shm->out().disarm_producer();
    }
  may_block.store(false, std::memory_order_relaxed);
  spin_until = Clock::now() + cfg.shm_spin;  // whatever woke us likely has a follow-up
}

}  // namespace dpt::tcp
