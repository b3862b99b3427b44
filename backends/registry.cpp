#include "backends/registry.h"

#include <unistd.h>

#include <stdexcept>

#include "backends/nccl/nccl_backend.h"
#include "backends/tcp/tcp_backend.h"
#include "comm/env.h"
#include "comm/job_token.h"
#include "comm/launch_env.h"
#include "comm/log.h"
#include "comm/tcp_store.h"
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

std::string resolve(const std::string& name) {
  if (name != "auto") return name;
#ifdef DPT_HAVE_MPI
  const LaunchInfo li = detect_launch();
  if (li.source == "openmpi" || li.source == "pmi") return "mpi";
#endif
  return "tcp";
}

static std::unique_ptr<Communicator> create_tcp(CommOptions options) {
  const LaunchInfo li = detect_launch();
  TcpBootstrap b;
  b.rank = li.rank;
  b.world_size = li.world_size;
  b.master_addr = li.master_addr.empty() ? "127.0.0.1" : li.master_addr;
  b.master_port = li.master_port;
  b.job_token = job_token_from_env();
  const bool under_mpi = li.source == "openmpi" || li.source == "pmi";
#ifdef DPT_HAVE_MPI
  // Under mpirun nobody handed the ranks a secret: rank 0 draws one and sends it over
  // MPI (trusted like the launcher's environment; never over TCP, never logged).
  // Decided on every rank from the same environment, so all or none take part.
  if (under_mpi && li.world_size > 1 && b.job_token.empty())
    b.job_token = mpi::broadcast_from_rank0(li.rank == 0 ? generate_job_token() : std::string());
#endif
  if (b.master_port == 0) {
    if (li.world_size == 1) {
      b.server = std::make_shared<TcpStoreServer>(b.master_addr, 0, b.job_token);
      b.master_port = b.server->port();
    } else if (under_mpi) {
#ifdef DPT_HAVE_MPI
      // Under mpirun without MASTER_PORT: rank 0 serves the store on a free port and
      // tells the others over MPI. Only the address travels over MPI; all traffic is TCP.
      std::string host = b.master_addr;
      if (li.master_addr.empty() && li.local_size < li.world_size) {
        char name[256] = {0};
        gethostname(name, sizeof(name) - 1);
        host = name;
      }
      std::string addr;
      if (li.rank == 0) {
        b.server = std::make_shared<TcpStoreServer>(host, 0, b.job_token);
        addr = host + " " + std::to_string(b.server->port());
      }
      addr = mpi::broadcast_from_rank0(addr);
      auto space = addr.rfind(' ');
      b.master_addr = addr.substr(0, space);
      b.master_port = std::stoi(addr.substr(space + 1));
#else
      throw std::invalid_argument("backend tcp under an MPI launcher needs MASTER_PORT (this build has no MPI to agree on one)");
#endif
    } else {
      throw std::invalid_argument("backend tcp: MASTER_PORT is not set for a world of " +
                                  std::to_string(li.world_size) +
                                  " ranks (launch with build/bin/launch, mpirun, or set MASTER_ADDR/MASTER_PORT)");
    }
  }
  return create_tcp_communicator(b, options);
}

// NCCL's unique id travels from rank 0 over MPI under an MPI launcher, else through the
// TCP store (rank 0 serves it at MASTER_ADDR:MASTER_PORT, authenticated by the job token).
static std::unique_ptr<Communicator> create_nccl(CommOptions options) {
  const LaunchInfo li = detect_launch();
  NcclBootstrap b;
  b.rank = li.rank;
  b.world_size = li.world_size;
  b.local_rank = li.local_rank;
  b.local_size = li.local_size;
  double rdzv_s = env::get_double(env::kRendezvousTimeoutS);
  if (rdzv_s <= 0) throw std::invalid_argument("COMM_RENDEZVOUS_TIMEOUT_S must be positive");
  b.init_timeout = Millis(static_cast<int64_t>(rdzv_s * 1000));
  if (li.world_size > 1) {
    const bool under_mpi = li.source == "openmpi" || li.source == "pmi";
#ifdef DPT_HAVE_MPI
    if (under_mpi && li.master_port == 0) {
      b.share_from_rank0 = [](const std::string& v) { return mpi::broadcast_from_rank0(v); };
    }
#endif
    if (!b.share_from_rank0) {
      if (li.master_port == 0)
        throw std::invalid_argument("backend nccl: MASTER_PORT is not set for a world of " + std::to_string(li.world_size) +
                                    " ranks (launch with build/bin/launch, mpirun, or set MASTER_ADDR/MASTER_PORT)");
      const std::string host = li.master_addr.empty() ? "127.0.0.1" : li.master_addr;
      const std::string token = job_token_from_env();
      const ErrorContext ctx{li.rank, li.world_size, "nccl", "rendezvous", -1, -1};
      std::shared_ptr<TcpStoreServer> server;
      if (li.rank == 0) server = std::make_shared<TcpStoreServer>(host, li.master_port, token);
      b.keep_alive = server;
      const int rank = li.rank;
      const Millis timeout = b.init_timeout;
      b.share_from_rank0 = [=](const std::string& v) {
        TcpStoreClient store(host, li.master_port, timeout, ctx, token);
        if (rank == 0) store.set("nccl/unique_id", v);
        return rank == 0 ? v : store.get("nccl/unique_id", timeout);
      };
    }
  }
  return create_nccl_communicator(b, options);
}

std::unique_ptr<Communicator> create(const std::string& requested, CommOptions options) {
  bool is_known = false;
  for (const auto& k : known()) is_known |= (k == requested);
  if (!is_known) {
    std::string valid;
    for (const auto& k : known()) valid += (valid.empty() ? "" : ", ") + k;
    throw std::invalid_argument("unknown backend '" + requested + "'; valid backends: " + valid);
  }
  const std::string name = resolve(requested);
  std::unique_ptr<Communicator> c;
  if (name == "tcp") {
    c = create_tcp(options);
  } else if (name == "mpi") {
#ifdef DPT_HAVE_MPI
    c = create_mpi_communicator(options);
    // Under build/bin/launch, torchrun or srun without PMI, each process starts MPI alone
    // (a singleton): it would train by itself, silently. Say so instead.
    const LaunchInfo li = detect_launch();
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
    c = create_nccl(options);
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
