// How a progress engine ends, or a peer's part in it (terms in progress_engine.h and
// engine_impl.h):
//   connection lost - a socket closed, reset, or sent an invalid frame: the peer is
//                     broken and the communicator fails (unless it had said goodbye, or
//                     we are shutting down or already failed: then it is forgotten).
//   communicator failure - every pending op fails with PeerError (AbortedError after a
//                     local abort()), unexpected frames are dropped, and every other open
//                     peer gets an abort frame before its connection closes (kAbortFlush
//                     at most), so the whole group fails within milliseconds.
//   goodbye         - a peer's clean end: ops waiting on it fail, its earlier frames stay
//                     receivable.
//   shutdown        - queue a goodbye to every open peer; receives still posted are
//                     released at once; the loop ends when every connection is closed.
//   deadline        - each op's (the communicator's timeout): checked every kExpiryCheck;
//                     a frame half read or half written past it breaks its connection.
#include <sys/socket.h>

#include "backends/tcp/engine_impl.h"
#include "comm/net/log.h"

namespace dpt::tcp {

using namespace engine;

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
    queue_abort(p);  // tell the peer, so it fails now instead of at its timeout
  }
  unexpected_bytes = 0;
  tell_unconnected_shm_peers(culprit);  // the abort frames above reach connected peers only
  if (failed_ops > 0 && !local_abort)
    log::warn("tcp: {} ({} pending operation(s) failed)", detail, failed_ops);
  else
    log::debug("tcp: communicator failed: {}", detail);
}

void ProgressEngine::Impl::queue_abort(Peer& p) {
  auto op = std::make_shared<Op>();
  op->is_send = true;
  op->peer = p.rank;
  op->owned = fail_detail.size() > kMaxAbortReason ? fail_detail.substr(0, kMaxAbortReason) : fail_detail;
  op->data = op->owned.data();
  op->bytes = op->owned.size();
  encode_header(FrameHeader{FrameType::abort, 0, op->bytes}, op->header);
  p.sendq.push_back(op);
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
    // A same-host peer never connected: its ring's goodbye flag (engine_shm.cpp, "notices").
    if (!failed && !p.sock.valid() && p.shm && p.state == PeerState::open) p.shm->out().say_goodbye();
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
    // Ops wait on a same-host peer never connected: did it shut down meanwhile?
    if (p.unconnected && (!p.posted.empty() || !p.sendq.empty())) unconnected_goodbye(p);
    // On demand (connector.h): a peer that never connected may be dead, stuck before
    // this operation, or running different operations; say which side had to dial.
    const std::string never =
        !p.unconnected ? std::string()
        : p.rank > cfg.rank
            ? fmt::format("; no connection to peer rank {} could be made yet (this rank dials it)", p.rank)
            : fmt::format("; peer rank {} never connected to this rank (it dials when it reaches its matching "
                          "operation: is it dead, stuck, or running different operations?)", p.rank);
    for (auto it = p.posted.begin(); it != p.posted.end();) {
      auto& q = it->second;
      while (!q.empty() && q.front()->deadline <= now) {
        fail<TimeoutError>(q.front(), fmt::format("no message from peer rank {} within {} ms (is it stuck or dead, or "
                                                  "did the ranks issue different operations?){}", p.rank,
                                                  q.front()->timeout_ms, never));
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
      fail<TimeoutError>(op, fmt::format("could not send to peer rank {} within {} ms: it is not reading (stuck?){}",
                                         p.rank, op->timeout_ms, never));
      return true;
    });
  }
}


// The engine thread ends: whatever is still pending can no longer complete.
void ProgressEngine::Impl::fail_leftovers() {
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
}

}  // namespace dpt::tcp
