#pragma once
// The tcp backend's public face: how to start it. Everything else about it is private
// to backends/tcp (see tcp_communicator.h for the design).
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/launch/launch_env.h"
#include "comm/store/tcp_store.h"

namespace dpt {

struct TcpBootstrap {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // Non-null on rank 0 when the caller already started the store server (e.g. on an
  // ephemeral port agreed over MPI); rank 0 otherwise serves master_addr:master_port.
  std::shared_ptr<TcpStoreServer> server;
  // The job's secret (comm/store/job_token.h); empty: COMM_JOB_TOKEN. A server passed above
  // must have been started with the same token.
  std::string job_token;
};

// Collective over all ranks: rendezvous through the store (timeout
// COMM_RENDEZVOUS_TIMEOUT_S), full mesh, then the communicator. Throws CommError
// subclasses (TimeoutError names the missing ranks) and std::invalid_argument for bad
// environment values.
std::unique_ptr<Communicator> create_tcp_communicator(const TcpBootstrap& bootstrap, CommOptions options);

// For a framework whose ranks already share a key-value store (PyTorch's c10d store,
// through an adapter): the same rendezvous, mesh and shared-memory setup, run in
// `store`. The store is kept for the communicator's lifetime; `prefix` names this
// communicator's keys in it (distinct per communicator made in one store), and
// `comm_id`, equal on every rank, is checked when peers connect (frame.h's hello).
struct TcpStoreRendezvous {
  int rank = 0;
  int world_size = 1;
  std::shared_ptr<Store> store;
  std::string prefix = "tcp";
  uint64_t comm_id = 0;
  // Where the other ranks are reached from (an address or host name; chooses the
  // interface to listen on, as MASTER_ADDR does); COMM_TCP_ADDR/COMM_TCP_IFNAME win.
  std::string peer_hint = "127.0.0.1";
  std::string job_token;  // every mesh connection proves it (comm/store/job_token.h)
  Millis timeout{120000}; // rendezvous deadline
  // When set: rank r, not yet at the rendezvous, never will be (an elastic job's dead
  // member), so the build fails at once instead of at the deadline.
  std::function<bool(int rank)> gone;
};
std::unique_ptr<Communicator> create_tcp_communicator_in_store(const TcpStoreRendezvous& r, CommOptions options);
// The world communicator of a job its launcher started (`li`: detect_launch()). Rank 0
// serves the store at MASTER_ADDR:MASTER_PORT. Under an MPI launcher, `share_from_rank0`
// (a broadcast over MPI; null where MPI is not built) carries what no launcher handed
// out: a job token rank 0 draws when COMM_JOB_TOKEN is unset, and, without MASTER_PORT,
// the address of a store rank 0 serves on a free port. Only those strings travel over
// MPI; all traffic is TCP. A world of one serves itself on a free port.
std::unique_ptr<Communicator> create_tcp_world(const LaunchInfo& li, CommOptions options,
                                               const ShareFromRank0& share_from_rank0);

}  // namespace dpt
