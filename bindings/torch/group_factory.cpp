#include "bindings/torch/group_factory.h"

#include <cstdlib>
#include <stdexcept>

#include "backends/registry.h"
#include "comm/launch/env.h"
#include "comm/store/job_token.h"

namespace dpt::torch_plugin {

// Where rank 0 publishes a drawn job token; under the group's own store prefix.
static constexpr const char* kTokenKey = "dpt/job_token";

std::string transport_from_env() {
  const std::string t = env::get_string(env::kTorchTransport);
  if (t == "tcp" || t == "mpi") return t;
  throw std::invalid_argument("DPT_BACKEND='" + t + "' is not a transport of the dpt torch backend; valid: tcp, mpi");
}

static std::string agree_on_token(Store& store, int rank, Millis timeout) {
  std::string token = job_token_from_env();
  if (!token.empty()) return token;
  if (rank == 0) {
    token = generate_job_token();
    store.set(kTokenKey, token);
    return token;
  }
  return store.get(kTokenKey, timeout);
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
    g.job_token = agree_on_token(*p.store, p.rank, p.timeout);
    g.peer_hint = peer_hint(p);
  }
  return backends::create_in_store(g, options);
}

}  // namespace dpt::torch_plugin
