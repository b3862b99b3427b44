#pragma once
// launch --bind cores: each local rank pinned to its own block of the CPUs launch may use
// (as mpirun --bind-to core), and the thread variables every rank gets (comm/launch/thread_plan.h).
//
// Blocks follow the CPUs' topology (package, then core, then CPU number), so the
// hyperthreads of one core land in one rank's block; with more ranks than CPUs the blocks
// wrap around (rank l gets CPU l mod count), and the header says they share.
#include <string>
#include <vector>

#include "tools/launch/options.h"

namespace launch {

// One CPU list per slot 0..nproc-1 (empty lists when --bind none).
std::vector<std::vector<int>> plan_binding(const Options& o);
// "rank 0: CPUs 0-1, rank 1: CPUs 2-3"
std::string binding_text(const Options& o, const std::vector<std::vector<int>>& cpus);
// In the child, before exec: false (errno set) when the kernel refuses.
bool bind_this_process(const std::vector<int>& cpus);

// Sets OMP_NUM_THREADS (and, where the ranks would share cores, OMP_WAIT_POLICY) in
// launch's own environment for every rank to inherit, unless the user set them; says once
// what it set (nothing for one rank per host without --bind: it plans for itself). False
// (having said why) for a malformed variable.
bool set_thread_env(const Options& o);

}  // namespace launch
