#pragma once
// TcpCommunicator: the project's Gloo-like backend. TCP connections between ranks, made
// when the communicator is built (same host) or when first needed (connector.h), driven
// by one progress engine thread (progress_engine.h), with shared-memory
// rings for same-host peers (shm_channel.h, COMM_TCP_SHM). The collectives are the base
// class's algorithms running on this class's point-to-point calls, except when every
// rank shares one host: then the native collectives run in a shared-memory arena
// (shm_collectives.h, COMM_TCP_SHM_COLL) and `auto` picks them.
#include <memory>

#include "backends/tcp/connector.h"
#include "backends/tcp/progress_engine.h"
#include "backends/tcp/shm_collectives.h"
#include "comm/communicator.h"
#include "comm/store/tcp_store.h"

namespace dpt {

class TcpCommunicator : public Communicator {
 public:
  // `sockets[r]` connects to rank r (from build_mesh). `store` and `server` are kept
  // for the communicator's lifetime (rank 0 serves the store others may still read).
  // `shm[r]`, when set, carries the frames to rank r (from setup_shm_channels).
  // `connector`, when set, connects the ranks whose socket is empty on demand.
  TcpCommunicator(int rank, int size, CommOptions options, std::vector<net::Socket> sockets,
                  std::shared_ptr<Store> store, std::shared_ptr<TcpStoreServer> server,
                  std::vector<tcp::ShmChannelPtr> shm = {}, std::unique_ptr<tcp::ShmArena> arena = nullptr,
                  std::unique_ptr<tcp::Connector> connector = nullptr);
  ~TcpCommunicator() override;

  std::string backend_name() const override { return "tcp"; }
  tcp::ProgressEngine::Stats stats() const { return engine_->stats(); }
  bool has_shm_arena() const { return shm_coll_ != nullptr; }
  // The store part of building: tcp::Mesh's wall-clock milestones (ms since the epoch;
  // tests/backends/tcp_connections_probe.cpp, bench/tcp_connections.sh).
  struct BuildTimes {
    double arrived_at_ms = 0, published_at_ms = 0, joined_at_ms = 0, eager_decided_at_ms = 0;
    // Requests this rank sent to the store while building (TcpStoreClient::requests_sent;
    // -1 where the store is another kind): O(1) per rank, O(P) at rank 0 (docs/multihost.md).
    int64_t store_requests = -1;
  };
  void set_build_times(const BuildTimes& t) { build_times_ = t; }
  const BuildTimes& build_times() const { return build_times_; }
  // The thread running one of our algorithms drives the engine (progress_engine.h).
  void algorithm_begins() override;
  void algorithm_ends() override;

 protected:
  WorkPtr do_isend(const Buffer& buf, int peer, int64_t tag) override;
  WorkPtr do_irecv(const Buffer& buf, int peer, int64_t tag) override;
  void do_abort(const std::string& reason) override;
  bool native_supports(const CollArgs& a) const override;
  bool native_preferred(const CollArgs& a) const override { return native_supports(a); }
  void run_native(const CollArgs& a) override;

 private:
  std::shared_ptr<Store> store_;
  std::shared_ptr<TcpStoreServer> server_;
  std::unique_ptr<tcp::Connector> connector_;  // stopped before the engine goes
  std::unique_ptr<tcp::ProgressEngine> engine_;
  std::unique_ptr<tcp::ShmCollectives> shm_coll_;  // one collective at a time (Communicator)
  BuildTimes build_times_;
};

// Knobs of this backend that are not in the lead's env.h constants.
inline constexpr const char* kTcpMaxUnexpectedBytesEnv = "COMM_TCP_MAX_UNEXPECTED_BYTES";
inline constexpr const char* kTcpShmEnv = "COMM_TCP_SHM";
inline constexpr const char* kTcpShmRingBytesEnv = "COMM_TCP_SHM_RING_BYTES";
inline constexpr const char* kTcpShmInboxBytesEnv = "COMM_TCP_SHM_INBOX_BYTES";
inline constexpr const char* kTcpShmSpinUsEnv = "COMM_TCP_SHM_SPIN_US";
inline constexpr const char* kTcpShmCollEnv = "COMM_TCP_SHM_COLL";
inline constexpr const char* kTcpShmSlotBytesEnv = "COMM_TCP_SHM_SLOT_BYTES";
inline constexpr const char* kTcpDriveEnv = "COMM_TCP_DRIVE";

// COMM_TCP_SHM_SPIN_US, validated: the engine's ring polling and the arena's barriers
// both spin this long before sleeping.
std::chrono::microseconds tcp_shm_spin_from_env();

}  // namespace dpt
