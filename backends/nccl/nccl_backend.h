#pragma once
// The nccl backend's entry points, compiled where CUDA and NCCL were found. Elsewhere the
// backend is not built and the registry says why (backends/registration.h), so callers
// need no #ifdef.
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/launch/launch_env.h"

namespace dpt {

// What a rank needs to join an NCCL communicator (create_nccl_world fills it from the
// launch environment): `share_from_rank0` hands rank 0's unique id to every rank (over
// MPI under mpirun, else through the TCP store), and `keep_alive` holds whatever serves
// that exchange (rank 0's store server) until the communicator is gone.
struct NcclBootstrap {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::function<std::string(const std::string& rank0_value)> share_from_rank0;
  Millis init_timeout{std::chrono::seconds(120)};
  std::shared_ptr<void> keep_alive;
};

// "built (NCCL 2.x.y), N CUDA device(s)" or why no device is usable.
std::string nccl_status();
std::unique_ptr<Communicator> create_nccl_communicator(const NcclBootstrap& b, CommOptions options);
// The world communicator of a launched job (`li`: detect_launch()). The unique id
// travels through `share_from_rank0` (MPI's broadcast; null where MPI is not built)
// under an MPI launcher without MASTER_PORT, else through a TCP store rank 0 serves at
// MASTER_ADDR:MASTER_PORT, authenticated by the job token (nccl_world.cpp).
std::unique_ptr<Communicator> create_nccl_world(const LaunchInfo& li, CommOptions options,
                                                const ShareFromRank0& share_from_rank0);

}  // namespace dpt
