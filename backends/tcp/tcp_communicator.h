#pragma once
// TcpCommunicator: the project's Gloo-like backend. A full mesh of TCP connections
// (mesh.h) driven by one progress engine thread (progress_engine.h), with shared-memory
// rings for same-host peers (shm_channel.h, COMM_TCP_SHM); the collectives are the base
// class's algorithms running on this class's point-to-point calls.
#include <memory>

#include "backends/tcp/progress_engine.h"
#include "comm/communicator.h"
#include "comm/tcp_store.h"

namespace dpt {

class TcpCommunicator : public Communicator {
 public:
  // `sockets[r]` connects to rank r (from build_mesh). `store` and `server` are kept
  // for the communicator's lifetime (rank 0 serves the store others may still read).
  // `shm[r]`, when set, carries the frames to rank r (from setup_shm_channels).
  TcpCommunicator(int rank, int size, CommOptions options, std::vector<net::Socket> sockets,
                  std::unique_ptr<Store> store, std::shared_ptr<TcpStoreServer> server,
                  std::vector<tcp::ShmChannelPtr> shm = {});
  ~TcpCommunicator() override;

  std::string backend_name() const override { return "tcp"; }
  tcp::ProgressEngine::Stats stats() const { return engine_->stats(); }

 protected:
  WorkPtr do_isend(const Buffer& buf, int peer, int64_t tag) override;
  WorkPtr do_irecv(const Buffer& buf, int peer, int64_t tag) override;
  void do_abort(const std::string& reason) override;

 private:
  std::unique_ptr<Store> store_;
  std::shared_ptr<TcpStoreServer> server_;
  std::unique_ptr<tcp::ProgressEngine> engine_;
};

// Knobs of this backend that are not in the lead's env.h constants.
inline constexpr const char* kTcpMaxUnexpectedBytesEnv = "COMM_TCP_MAX_UNEXPECTED_BYTES";
inline constexpr const char* kTcpShmEnv = "COMM_TCP_SHM";
inline constexpr const char* kTcpShmRingBytesEnv = "COMM_TCP_SHM_RING_BYTES";
inline constexpr const char* kTcpShmSpinUsEnv = "COMM_TCP_SHM_SPIN_US";

}  // namespace dpt
