#include "backends/tcp/tcp_communicator.h"

#include "comm/launch/env.h"

namespace dpt {

static uint64_t positive_env(const char* name) {
  int64_t v = env::get_int(name);
  if (v <= 0) throw std::invalid_argument(std::string(name) + " must be positive");
  return static_cast<uint64_t>(v);
}

std::chrono::microseconds tcp_shm_spin_from_env() {
  const int64_t spin = env::get_int(kTcpShmSpinUsEnv);
  if (spin < 0) throw std::invalid_argument("COMM_TCP_SHM_SPIN_US must be >= 0");
  return std::chrono::microseconds(spin);
}

TcpCommunicator::TcpCommunicator(int rank, int size, CommOptions options, std::vector<net::Socket> sockets,
                                 std::shared_ptr<Store> store, std::shared_ptr<TcpStoreServer> server,
                                 std::vector<tcp::ShmChannelPtr> shm, std::unique_ptr<tcp::ShmArena> arena,
                                 std::unique_ptr<tcp::Connector> connector)
    : Communicator(rank, size, options), store_(std::move(store)), server_(std::move(server)),
      connector_(std::move(connector)) {
  tcp::EngineConfig cfg;
  cfg.rank = rank;
  cfg.world = size;
  cfg.max_frame_bytes = positive_env(env::kMaxFrameBytes);
  cfg.max_unexpected_bytes = positive_env(kTcpMaxUnexpectedBytesEnv);
  cfg.op_timeout = options.timeout;
  cfg.shm_spin = tcp_shm_spin_from_env();
  cfg.waiters_drive = env::get_int(kTcpDriveEnv) != 0;
  // Context is built from rank/size/backend, never from the (changing) options.
  cfg.context = [rank, size](const std::string& op, int peer) { return ErrorContext{rank, size, "tcp", op, peer, -1}; };
  if (connector_) cfg.dial = [c = connector_.get()](int peer, Millis timeout) { c->dial(peer, timeout); };
  if (connector_) cfg.watch = [c = connector_.get()](int peer) { c->watch(peer); };
  try {
    engine_ = std::make_unique<tcp::ProgressEngine>(std::move(cfg), std::move(sockets), std::move(shm));
    if (connector_)
      connector_->start([e = engine_.get()](int peer, net::Socket s, const std::string& error) {
        e->adopt(peer, std::move(s), error);
      });
    if (arena)
      shm_coll_ = std::make_unique<tcp::ShmCollectives>(std::move(arena), *engine_,
                                                        ErrorContext{rank, size, "tcp", "", -1, -1});
  } catch (...) {
    if (connector_) connector_->stop();
    shutdown_worker();  // the base's worker must not outlive a failed construction
    throw;
  }
}

TcpCommunicator::~TcpCommunicator() {
  // Collectives first (they use the engine), then the engine says goodbye to the peers.
  shutdown_worker();
  if (shm_coll_) shm_coll_->mark_departed();  // the arena's waits on this rank end now
  if (connector_) connector_->stop();  // no connection may arrive at a gone engine
  engine_.reset();
}

// The current timeout() travels with each op, so set_timeout() applies to later ops.
WorkPtr TcpCommunicator::do_isend(const Buffer& buf, int peer, int64_t tag) {
  return engine_->isend(buf, peer, tag, timeout());
}
WorkPtr TcpCommunicator::do_irecv(const Buffer& buf, int peer, int64_t tag) {
  return engine_->irecv(buf, peer, tag, timeout());
}
void TcpCommunicator::algorithm_begins() { engine_->begin_drive(); }
void TcpCommunicator::algorithm_ends() { engine_->end_drive(); }
void TcpCommunicator::do_abort(const std::string& reason) {
  if (shm_coll_) shm_coll_->mark_failed();  // peers waiting in the arena have no socket to hear it on
  engine_->abort(reason);
}

bool TcpCommunicator::native_supports(const CollArgs& a) const {
  return shm_coll_ && tcp::ShmCollectives::supports(a);
}
void TcpCommunicator::run_native(const CollArgs& a) { shm_coll_->run(a, timeout()); }

}  // namespace dpt
