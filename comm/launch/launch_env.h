#pragma once
// Launch detection: who am I and how many are we, from whichever launcher started us.
// Order: torchrun-style (RANK/WORLD_SIZE, set by tools/launch) > Open MPI
// (OMPI_COMM_WORLD_*) > PMI (PMI_RANK/PMI_SIZE, MPICH/Hydra) > Slurm (SLURM_PROCID/
// SLURM_NTASKS) > a single process.
#include <functional>
#include <string>

namespace dpt {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr;  // empty when not given
  int master_port = 0;      // 0 when not given
  std::string source;       // "torchrun", "openmpi", "pmi", "slurm" or "single"
  // Started by an MPI launcher (mpirun/mpiexec, or srun with PMI).
  bool under_mpi() const { return source == "openmpi" || source == "pmi"; }
};

// Hands rank 0's value to every rank (each passes its own; rank 0's is returned
// everywhere): a broadcast over a channel the launcher provides, such as MPI, used by
// backends to agree on a store address or a secret before they have a connection.
using ShareFromRank0 = std::function<std::string(const std::string& rank0_value)>;

// Throws std::invalid_argument with the variable's name for malformed or inconsistent
// values (RANK=abc, RANK >= WORLD_SIZE, ...).
LaunchInfo detect_launch();

}  // namespace dpt
