// The progress engine's public face and its posting path (terms in progress_engine.h;
// the inside is engine_impl.h, which names the file of each job).
#include "backends/tcp/progress_engine.h"

#include <sys/eventfd.h>

#include <cerrno>

#include "backends/tcp/engine_impl.h"

namespace dpt::tcp {

using namespace engine;

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
    // A shared-memory peer may still be unconnected: its ring is used once the socket
    // that carries its doorbells arrives on demand (connector.h), like any other peer's.
    p.shm = m.channels[static_cast<size_t>(r)].get();
    m.any_shm |= p.shm != nullptr;
    if (p.shm && !m.own_inbox) m.own_inbox = p.shm;
    if (r < static_cast<int>(sockets.size()) && sockets[r].valid()) {
      m.adopt_socket(p, std::move(sockets[r]));
      ++m.connections;
    } else if (r != m.cfg.rank && m.cfg.dial) {
      p.unconnected = true;
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

void ProgressEngine::adopt(int peer, net::Socket sock, const std::string& error) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (m.exited) return;
    m.arrivals.push_back(Arrival{peer, std::move(sock), error});
  }
  m.gate->kick();  // also a driver in poll() must see it
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
               m.unexpected_frames.load(), m.unexpected_peak.load(), m.completed_by_waiters.load(), shm_peers,
               m.connections.load()};
}

}  // namespace dpt::tcp
