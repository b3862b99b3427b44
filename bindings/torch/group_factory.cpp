#include "bindings/torch/group_factory.h"

#include <cstdlib>
#include <stdexcept>

#include "backends/registry.h"
#include "comm/launch/env.h"
#include "comm/store/job_token.h"

namespace dpt::torch_plugin {

std::string transport_from_env() {
  const std::string t = env::get_string(env::kTorchTransport);
  if (t == "tcp" || t == "mpi") return t;
  throw std::invalid_argument("DPT_BACKEND='" + t + "' is not a transport of the dpt torch backend; valid: tcp, mpi");
}

static std::string peer_hint(const GroupParams& p) {
  if (const char* v = std::getenv("MASTER_ADDR"); v && *v) return v;
  if (!p.store_host.empty()) return p.store_host;
  return "127.0.0.1";
}

std::unique_ptr<Communicator> make_group_communicator(const GroupParams& p) {
  CommOptions options = CommOptions::from_env();
  if (const char* a = std::getenv(env::kTorchAlgo); a && *a) options.algo = parse_algo(a);
  options.timeout = p.timeout;
  backends::StoreGroup g;
  g.backend = transport_from_env();
  g.store = p.store;
  g.rank = p.rank;
  g.size = p.size;
  g.world_ranks = p.world_ranks;
  g.group_name = p.group_name;
  g.rendezvous_timeout = p.timeout;
  if (g.backend == "tcp" && p.size > 1) {
    // Only from the environment (COMM_JOB_TOKEN, or build/bin/launch's): PyTorch's store
    // has no authentication, so a secret written there would be anyone's. Without one the
    // group runs open on one host and refuses beyond it (job_token.h, open_job_refusal).
    g.job_token = job_token_from_env();
    g.peer_hint = peer_hint(p);
  }
  return backends::create_in_store(g, options);
}

}  // namespace dpt::torch_plugin
