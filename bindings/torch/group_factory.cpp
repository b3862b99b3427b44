#include "bindings/torch/group_factory.h"

#include <cstdlib>
#include <stdexcept>

#include "backends/registry.h"
#include "comm/launch/env.h"
#include "comm/net/socket.h"
#include "comm/store/job_token.h"
#include "comm/store/munge_secret.h"

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

// The group's secret, never written into PyTorch's store in a form anyone can read (that
// store has no authentication): COMM_JOB_TOKEN (or build/bin/launch's); under srun across
// hosts, one rank 0 draws, handed to each rank as its own munge credential
// (comm/store/munge_secret.h), which only this user's processes on this cluster decode.
// Otherwise none: the group then runs open on one host and refuses beyond it
// (open_job_refusal).
static std::string token_for_group(const GroupParams& p) {
  std::string token = job_token_from_env();
  if (!token.empty()) return token;
  const std::string hint = peer_hint(p);
  if (network_exposure(hint, net::choose_listen_host(hint)).empty() || !munge_usable()) return "";
  const std::string key = "dpt/munge/";
  if (p.rank == 0) {
    token = generate_job_token();
    for (int r = 1; r < p.size; ++r) p.store->set(key + std::to_string(r), munge_seal(token));
    return token;
  }
  return munge_open(p.store->get(key + std::to_string(p.rank), p.timeout));
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
    g.job_token = token_for_group(p);
    g.peer_hint = peer_hint(p);
  }
  return backends::create_in_store(g, options);
}

}  // namespace dpt::torch_plugin
