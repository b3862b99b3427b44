// The mpi backend's registration (backends/registration.h): "auto" under an MPI
// launcher, MPI's broadcast for the other backends' bootstraps there, and MPI_Abort for
// programs that fail.
#include "backends/mpi/mpi_communicator.h"
#include "backends/mpi/mpi_runtime.h"
#include "backends/registration.h"

namespace dpt::backends {

namespace {

std::unique_ptr<Communicator> world(const LaunchInfo& li, CommOptions options, const ShareFromRank0&) {
  auto c = create_mpi_communicator(options);
  // Under build/bin/launch, torchrun or srun without PMI, each process starts MPI alone
  // (a singleton): it would train by itself, silently. Say so instead.
  if (li.world_size != c->size())
    throw UsageError(ErrorContext{li.rank, li.world_size, "mpi", "init", -1, -1},
                     "the launch variables (" + li.source + " style) say " + std::to_string(li.world_size) +
                         " processes, but MPI sees a world of " + std::to_string(c->size()) +
                         " (each process is its own MPI job): start MPI jobs with mpirun/srun (mpirun -np " +
                         std::to_string(li.world_size) + " ...), or use --backend tcp under this launcher");
  return c;
}

std::unique_ptr<Communicator> in_store(const StoreGroup& g, CommOptions options) {
  std::unique_ptr<Communicator> c;
  if (g.world_ranks.empty()) {
    c = create_mpi_communicator(options);
  } else {
    // MPI tags are at least 15 bits; the name tells concurrent creations apart.
    c = create_mpi_group_communicator(g.world_ranks, static_cast<int>(group_hash(g.group_name) % 32767), options);
  }
  if (c->size() != g.size || c->rank() != g.rank)
    throw UsageError(ErrorContext{g.rank, g.size, g.backend, "init", -1, -1},
                     "MPI places this process at rank " + std::to_string(c->rank()) + " of " +
                         std::to_string(c->size()) + ", but the caller says rank " + std::to_string(g.rank) + " of " +
                         std::to_string(g.size) +
                         ": start the job with mpirun (one MPI world), or use the tcp backend under this launcher");
  return c;
}

ShareFromRank0 broadcast_under_mpi(const LaunchInfo& li) {
  if (!li.under_mpi()) return nullptr;
  return [](const std::string& v) { return mpi::broadcast_from_rank0(v); };
}

}  // namespace

const Registration& mpi_registration() {
  static const Registration r{
      .name = "mpi",
      .status = [] { return std::string("built (Open MPI point-to-point and native collectives)"); },
      .takes_auto = [](const LaunchInfo& li) { return li.under_mpi(); },
      .create_world = world,
      .create_in_store = in_store,
      .launcher_share = broadcast_under_mpi,
      .abort_job = mpi::abort_job,
  };
  return r;
}

}  // namespace dpt::backends
