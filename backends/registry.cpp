#include "backends/registry.h"

#include <stdexcept>

#include "backends/nccl/nccl_backend.h"
#include "backends/tcp/tcp_backend.h"
#include "comm/env.h"
#include "comm/launch_env.h"
#include "comm/log.h"
#ifdef DPT_HAVE_MPI
#include "backends/mpi/mpi_communicator.h"
#include "backends/mpi/mpi_runtime.h"
#endif

namespace dpt::backends {

const std::vector<std::string>& known() {
  static const std::vector<std::string> k = {"mpi", "tcp", "nccl", "auto"};
  return k;
}

std::vector<std::string> available() {
  std::vector<std::string> out;
#ifdef DPT_HAVE_MPI
  out.push_back("mpi");
#endif
  out.push_back("tcp");
  if (nccl_built()) out.push_back("nccl");
  return out;
}

std::string describe(const std::string& name) {
  if (name == "mpi") {
#ifdef DPT_HAVE_MPI
    return "mpi: built (Open MPI point-to-point and native collectives)";
#else
    return "mpi: not built (no MPI found at configure time)";
#endif
  }
  if (name == "tcp") return "tcp: built (own backend: TCP mesh, store rendezvous)";
  if (name == "nccl") return std::string("nccl: ") + nccl_status();
  return name + ": unknown";
}

std::string default_name() { return env::get_string(env::kBackend); }

namespace {

// What `auto` means under this launch (registry.h).
std::string resolve_for(const std::string& name, const LaunchInfo& li) {
  if (name != "auto") return name;
#ifdef DPT_HAVE_MPI
  if (li.under_mpi()) return "mpi";
#endif
  return "tcp";
}

// Under an MPI launcher, the other backends' bootstraps share rank 0's strings over MPI.
ShareFromRank0 mpi_share(const LaunchInfo& li) {
#ifdef DPT_HAVE_MPI
  if (li.under_mpi()) return [](const std::string& v) { return mpi::broadcast_from_rank0(v); };
#endif
  return nullptr;
}

}  // namespace

std::string resolve(const std::string& name) { return resolve_for(name, detect_launch()); }

std::unique_ptr<Communicator> create(const std::string& requested, CommOptions options) {
  bool is_known = false;
  for (const auto& k : known()) is_known |= (k == requested);
  if (!is_known) {
    std::string valid;
    for (const auto& k : known()) valid += (valid.empty() ? "" : ", ") + k;
    throw std::invalid_argument("unknown backend '" + requested + "'; valid backends: " + valid);
  }
  const LaunchInfo li = detect_launch();
  const std::string name = resolve_for(requested, li);
  std::unique_ptr<Communicator> c;
  if (name == "tcp") {
    c = create_tcp_world(li, options, mpi_share(li));
  } else if (name == "mpi") {
#ifdef DPT_HAVE_MPI
    c = create_mpi_communicator(options);
    // Under build/bin/launch, torchrun or srun without PMI, each process starts MPI alone
    // (a singleton): it would train by itself, silently. Say so instead.
    if (li.world_size != c->size())
      throw UsageError(ErrorContext{li.rank, li.world_size, "mpi", "init", -1, -1},
                       "the launch variables (" + li.source + " style) say " + std::to_string(li.world_size) +
                           " processes, but MPI sees a world of " + std::to_string(c->size()) +
                           " (each process is its own MPI job): start MPI jobs with mpirun/srun (mpirun -np " +
                           std::to_string(li.world_size) + " ...), or use --backend tcp under this launcher");
#else
    throw NotBuiltError("backend 'mpi' is not built: no MPI was found when this build was configured");
#endif
  } else if (name == "nccl") {
    c = create_nccl_world(li, options, mpi_share(li));
  }
  log::set_rank(c->rank());
  log::info("created backend {} ({} of {})", name, c->rank(), c->size());
  return c;
}

// FNV-1a: a group's name to a number every member computes alike.
static uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::unique_ptr<Communicator> create_in_store(const StoreGroup& g, CommOptions options) {
  const ErrorContext ctx{g.rank, g.size, g.backend, "init", -1, -1};
  std::unique_ptr<Communicator> c;
  if (g.backend == "tcp") {
    TcpStoreRendezvous r;
    r.rank = g.rank;
    r.world_size = g.size;
    r.store = g.store;
    r.prefix = "dpt/tcp";
    r.comm_id = name_hash(g.group_name);
    r.peer_hint = g.peer_hint;
    r.job_token = g.job_token;
    r.timeout = g.rendezvous_timeout;
    c = create_tcp_communicator_in_store(r, options);
  } else if (g.backend == "mpi") {
#ifdef DPT_HAVE_MPI
    if (g.world_ranks.empty()) {
      c = create_mpi_communicator(options);
    } else {
      // MPI tags are at least 15 bits; the name tells concurrent creations apart.
      c = create_mpi_group_communicator(g.world_ranks, static_cast<int>(name_hash(g.group_name) % 32767), options);
    }
    if (c->size() != g.size || c->rank() != g.rank)
      throw UsageError(ctx, "MPI places this process at rank " + std::to_string(c->rank()) + " of " +
                                std::to_string(c->size()) + ", but the caller says rank " + std::to_string(g.rank) +
                                " of " + std::to_string(g.size) +
                                ": start the job with mpirun (one MPI world), or use the tcp backend under this launcher");
#else
    throw NotBuiltError("backend 'mpi' is not built: no MPI was found when this build was configured");
#endif
  } else {
    throw UsageError(ctx, "backend '" + g.backend + "' cannot be made from a store; valid: tcp, mpi");
  }
  log::set_rank(g.rank);
  log::info("group '{}': {} communicator, rank {} of {}", g.group_name, c->backend_name(), c->rank(), c->size());
  return c;
}

std::string share_over_mpi(const std::string& value) {
#ifdef DPT_HAVE_MPI
  const LaunchInfo li = detect_launch();
  if (li.source == "openmpi" || li.source == "pmi") return mpi::broadcast_from_rank0(value);
#endif
  return value;
}

void abort_job(int exit_code) {
#ifdef DPT_HAVE_MPI
  mpi::abort_job(exit_code);
#endif
}

}  // namespace dpt::backends
