// The tcp backend's registration (backends/registration.h): built everywhere, and what
// "auto" falls back to under any launch.
#include "backends/registration.h"
#include "backends/tcp/tcp_backend.h"

namespace dpt::backends {

namespace {

std::unique_ptr<Communicator> in_store(const StoreGroup& g, CommOptions options) {
  TcpStoreRendezvous r;
  r.rank = g.rank;
  r.world_size = g.size;
  r.store = g.store;
  r.prefix = "dpt/tcp";
  r.comm_id = group_hash(g.group_name);
  r.peer_hint = g.peer_hint;
  r.job_token = g.job_token;
  r.timeout = g.rendezvous_timeout;
  return create_tcp_communicator_in_store(r, options);
}

}  // namespace

const Registration& tcp_registration() {
  static const Registration r{
      .name = "tcp",
      .status = [] { return std::string("built (own backend: TCP mesh, store rendezvous)"); },
      .takes_auto = [](const LaunchInfo&) { return true; },
      .create_world = create_tcp_world,
      .create_in_store = in_store,
  };
  return r;
}

}  // namespace dpt::backends
