// create_nccl_world: the nccl backend's bootstrap from the launcher's variables.
#include "backends/nccl/nccl_backend.h"

#include <stdexcept>

#include "comm/launch/env.h"
#include "comm/store/job_token.h"
#include "comm/store/tcp_store.h"

namespace dpt {

std::unique_ptr<Communicator> create_nccl_world(const LaunchInfo& li, CommOptions options,
                                                const ShareFromRank0& share_from_rank0) {
  NcclBootstrap b;
  b.rank = li.rank;
  b.world_size = li.world_size;
  b.local_rank = li.local_rank;
  b.local_size = li.local_size;
  b.init_timeout = env::rendezvous_timeout();
  if (li.world_size == 1) return create_nccl_communicator(b, options);
  if (share_from_rank0 && li.master_port == 0) {
    b.share_from_rank0 = share_from_rank0;
    return create_nccl_communicator(b, options);
  }
  if (li.master_port == 0)
    throw std::invalid_argument("backend nccl: MASTER_PORT is not set for a world of " + std::to_string(li.world_size) +
                                " ranks (launch with build/bin/launch, mpirun, or set MASTER_ADDR/MASTER_PORT)");
  const std::string host = li.master_addr.empty() ? "127.0.0.1" : li.master_addr;
  const std::string token = job_token_from_env();
  const ErrorContext ctx{li.rank, li.world_size, "nccl", "rendezvous", -1, -1};
  std::shared_ptr<TcpStoreServer> server;
  if (li.rank == 0) server = std::make_shared<TcpStoreServer>(host, li.master_port, token);
  b.keep_alive = server;
  const int rank = li.rank, port = li.master_port;
  const Millis timeout = b.init_timeout;
  b.share_from_rank0 = [=](const std::string& v) {
    TcpStoreClient store(host, port, timeout, ctx, token);
    if (rank == 0) store.set("nccl/unique_id", v);
    return rank == 0 ? v : store.get("nccl/unique_id", timeout);
  };
  return create_nccl_communicator(b, options);
}

}  // namespace dpt
