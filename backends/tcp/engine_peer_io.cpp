// One connection's frames (terms in progress_engine.h and engine_impl.h): posted ops
// are routed to the peer's send queue or matched against frames that arrived early;
// send queues are written with sendmsg() (or into a shared-memory ring), gathering
// many frames per call; frames are read as header, then payload, into the posted
// receive's buffer (direct) or an unexpected buffer counted against
// COMM_TCP_MAX_UNEXPECTED_BYTES (beyond it the peer is paused, so TCP flow control
// pushes back, until a matching receive is posted or the budget frees up).
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backends/tcp/engine_impl.h"

namespace dpt::tcp {

using namespace engine;

// =====================================================================================
// Routing posted ops

void ProgressEngine::Impl::route(const OpPtr& op) {
  Peer& p = peers[static_cast<size_t>(op->peer)];
  if (p.shm) shm_progress = true;  // a new op on a ring: its answer comes soon
  if (failed) return fail_with_failure(op);
  unconnected_goodbye(p);  // a same-host peer that shut down before the pair talked
  if (p.unconnected && !p.dial_asked && p.rank > cfg.rank && !shutting_down) {
    p.dial_asked = true;  // the lower rank dials (connector.h)
    cfg.dial(p.rank, Millis(op->timeout_ms));
  }
  if (p.unconnected && !p.watch_asked && p.rank < cfg.rank && cfg.watch && !shutting_down) {
    p.watch_asked = true;  // it dials us; meanwhile make sure it still lives
    cfg.watch(p.rank);
  }
  if (op->is_send) {
    if (p.state != PeerState::open || p.goodbye_queued || (!p.sock.valid() && !p.unconnected)) return fail_departed(op);
    encode_header(FrameHeader{FrameType::data, op->tag, op->bytes}, op->header);
    p.sendq.push_back(op);
    return;
  }
  match_recv(p, op);
}

void ProgressEngine::Impl::take_arrival(Arrival& a) {
  Peer& p = peers[size_t(a.peer)];
  if (!p.unconnected) return;  // already connected or given up: the socket closes
  p.unconnected = false;
  if (!a.error.empty()) {
    on_connection_lost(p, fmt::format("could not connect to peer rank {}: {}", p.rank, a.error));
    return;
  }
  if (shutting_down && !failed) {
    p.state = PeerState::broken;  // too late: closing tells the peer
    return;
  }
  adopt_socket(p, std::move(a.sock));
  ++connections;
  if (failed) {
    // A connection that completes after this communicator failed (its dial or its accept
    // was under way; even while it shuts down) still gets the abort frame: dropped, the
    // peer would see a reset or an end and blame this rank instead of the failure's cause.
    p.closing = true;
    queue_abort(p);
    close_deadline = std::max(close_deadline, Clock::now() + kAbortFlush);
  }
}

void ProgressEngine::Impl::adopt_socket(Peer& p, net::Socket s) {
  p.sock = std::move(s);
  net::set_nonblocking(p.sock.fd(), true);
  // A shared-memory peer's socket carries one-byte doorbells, not frames: no records.
  if (p.sock.session() && !p.shm) p.rec = std::make_unique<net::RecordChannel>(*p.sock.session());
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

// The unsent rest of the queued frames (headers and payloads), at most kMaxIov pieces.
static int gather_unsent(const Peer& p, iovec* iov) {
  int n = 0;
  for (auto& op : p.sendq) {
    if (n + 2 > kMaxIov) break;
    if (op->header_sent < kHeaderBytes) iov[n++] = {op->header + op->header_sent, kHeaderBytes - op->header_sent};
    if (op->done < op->bytes) iov[n++] = {op->data + op->done, op->bytes - op->done};
  }
  return n;
}

bool ProgressEngine::Impl::flush(Peer& p) {
  if (p.rec) return flush_records(p);
  size_t written = 0;
  while (!p.sendq.empty() && written < kWriteBudget) {
    iovec iov[kMaxIov];
    const int n = gather_unsent(p, iov);
    ssize_t w;
    if (p.shm) {
      // A goodbye alone on a ring never written goes as a flag (shm_ring.h): a pair
      // that never talked then takes no ring page at all.
      const Op& front = *p.sendq.front();
      if (p.shm->out().produced() == 0 && p.sendq.size() == 1 && !front.work && front.bytes == 0 &&
          front.header_sent == 0 && p.goodbye_queued) {
        p.shm->out().say_goodbye();
        p.sendq.pop_front();
        ++frames_sent;
        return true;
      }
      // The ring's pages are taken from /dev/shm as writes reach them (shm_channel.h): a
      // full /dev/shm fails the communicator here, naming it, instead of a SIGBUS.
      size_t upcoming = 0;
      for (int i = 0; i < n; ++i) upcoming += iov[i].iov_len;
      if (const std::string why = p.shm->reserve_out(upcoming); !why.empty()) {
        fail_communicator(fmt::format("no shared memory for the ring to peer rank {}: {}", p.rank, why), false, -1);
        return false;
      }
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
      on_send_error(p, errno);
      return false;
    }
    written += static_cast<size_t>(w);
    bytes_sent += static_cast<uint64_t>(w);
    sent(p, static_cast<size_t>(w));
  }
  return true;
}

// Sealing and writing alternate: the front frames are sealed (at most kSealBatch bytes)
// only once the previous records are all out, so at most one batch of ciphertext waits.
bool ProgressEngine::Impl::flush_records(Peer& p) {
  net::RecordWriter& out = p.rec->writer;
  size_t written = 0;
  while (written < kWriteBudget) {
    if (out.idle()) {
      if (p.sendq.empty()) return true;
      iovec iov[kMaxIov];
      sent(p, out.seal(iov, gather_unsent(p, iov), kSealBatch));  // sealed: the ops' buffers are free
    }
    const ssize_t w = out.write_to(p.sock.fd());
    if (w < 0) {
      on_send_error(p, errno);
      return false;
    }
    if (w == 0) return true;  // the socket is full: POLLOUT resumes us
    written += static_cast<size_t>(w);
    bytes_sent += static_cast<uint64_t>(w);
  }
  return true;
}

void ProgressEngine::Impl::sent(Peer& p, size_t bytes) {
  size_t left = bytes;
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

void ProgressEngine::Impl::on_send_error(Peer& p, int err) {
  // A peer that failed first sent an abort frame naming the cause (often another
  // rank) before its close reset this send: read what it left before blaming it.
  if (!failed && !shutting_down && !p.closing && !p.paused) read_peer(p);
  if (failed || !p.sock.valid()) return;
  on_connection_lost(p, fmt::format("connection to peer rank {} lost while sending ({}): did it exit or crash?", p.rank,
                                    net::errno_string(err)));
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
    // Records already taken from the kernel raise no POLLIN: read them now.
    if (budget == 0 && !(p.rec && p.rec->reader.ready())) return true;
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
    } else if (p.rec) {
      try {
        r = p.rec->reader.read(p.sock.fd(), dst, want);
      } catch (const crypto::AuthFailure& e) {
        // Nothing of the record reached a frame: the communicator stops instead. No rank
        // is blamed (the path, not the peer, changed the bytes), so the peer too gets the
        // abort frame, sealed as usual, and learns why; this side reads from it no more.
        fail_communicator(fmt::format("connection with peer rank {} ({}) failed its authentication check: {}; "
                                      "a frame was tampered with, replayed or injected on the way (or the "
                                      "peer is not of this job), so the job stops rather than use it",
                                      p.rank, p.rec->connection, e.what()),
                          false, -1);
        return false;
      }
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
      bool mid = p.in_payload || p.hdr_got > 0 || (p.rec && p.rec->reader.mid_record());
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
// Early frames: the budget

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

}  // namespace dpt::tcp
