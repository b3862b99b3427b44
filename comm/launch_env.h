#pragma once
// Launch detection: who am I and how many are we, from whichever launcher started us.
// Order: torchrun-style (RANK/WORLD_SIZE, set by tools/launch) > Open MPI
// (OMPI_COMM_WORLD_*) > PMI (PMI_RANK/PMI_SIZE, MPICH/Hydra) > Slurm (SLURM_PROCID/
// SLURM_NTASKS) > a single process.
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
};

// Throws std::invalid_argument with the variable's name for malformed or inconsistent
// values (RANK=abc, RANK >= WORLD_SIZE, ...).
LaunchInfo detect_launch();

}  // namespace dpt
