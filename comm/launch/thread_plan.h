#pragma once
// How many compute threads (BLAS, oneDNN's OpenMP team, parallel_for) each rank runs, and
// whether they may spin between products: decided from the cores this process may use
// (comm/launch/cpu_budget.h) and the ranks that share this host (comm/launch/launch_env.h), unless the
// user said. Two ranks on two cores that each start a thread per core run four threads
// that spin against each other: that made the Quick start 30x slower than
// OMP_NUM_THREADS=1. torchrun sets OMP_NUM_THREADS=1 whenever it starts several processes
// per node; this is the same idea with the cores divided instead of dropped to one.
//
// Threads, first that applies:
//   1. --threads N (a program's flag)
//   2. OPENBLAS_NUM_THREADS, then OMP_NUM_THREADS (as OpenBLAS itself reads them; tools/
//      launch sets OMP_NUM_THREADS for its children, and says so with DPT_LAUNCH_THREADS)
//   3. max(1, min(affinity, host cores / ranks on this host)): the host's cores shared
//      out, and never more than the mask a launcher bound this process to.
// Waiting between products (libgomp's OMP_WAIT_POLICY; OpenBLAS's OPENBLAS_THREAD_TIMEOUT):
//   - OMP_WAIT_POLICY set: as given.
//   - one thread: nothing waits (no team).
//   - passive when this rank's threads, plus its communication engine's thread when the
//     job has more than one rank, exceed the cores it has (its mask when bound, else its
//     share of the host): a spinning thread would take a core another thread needs.
//   - otherwise active (spinning saves the wake-up between back-to-back products).
// Both libraries read these variables once, when they are loaded: a program that needs
// passive waiting and finds neither set re-executes itself with them set
// (setup_cpu_threads in train/cpu_threads_setup.h).
#include <string>

#include "comm/launch/cpu_budget.h"

namespace dpt {

// What the user (or the launcher) set. Raw environment text, checked by plan_threads.
struct ThreadSettings {
  int flag_threads = 0;                // --threads; 0: not given
  std::string openblas_num_threads;    // OPENBLAS_NUM_THREADS
  std::string omp_num_threads;         // OMP_NUM_THREADS
  std::string omp_wait_policy;         // OMP_WAIT_POLICY
  std::string launch_threads;          // DPT_LAUNCH_THREADS: the OMP_NUM_THREADS tools/launch set
  static ThreadSettings from_env(int flag_threads = 0);
};

struct ThreadPlan {
  int threads = 1;
  bool passive = false;           // threads sleep between products
  bool wait_from_user = false;    // OMP_WAIT_POLICY given: leave it alone
  std::string threads_why;        // "2 cores on this host / 2 ranks", "OMP_NUM_THREADS=3", ...
  std::string wait_why;
  // "1 per rank (2 cores on this host (2 online) / 2 ranks on this host); waiting: no team (1 thread)"
  std::string text() const;
  // The variables a process must have at load time for this plan: OMP_WAIT_POLICY (and
  // OPENBLAS_THREAD_TIMEOUT) when passive and not given by the user; empty otherwise.
  std::string wait_env_value() const { return passive && !wait_from_user ? "PASSIVE" : ""; }
};

// Throws std::invalid_argument naming the variable for a value that is not a positive
// integer (OMP_NUM_THREADS="4,2", a nested list, counts as its first level, as libgomp reads it).
ThreadPlan plan_threads(const ThreadSettings& s, const CpuBudget& budget, int local_ranks, int world_size);

// The environment variables tools/launch gives its children: OMP_NUM_THREADS when the
// user set none of them (with DPT_LAUNCH_THREADS, its marker), and OMP_WAIT_POLICY /
// OPENBLAS_THREAD_TIMEOUT where the plan says passive. `note` says what was set and why.
struct LaunchThreadEnv {
  std::string omp_num_threads;  // "" when the user's own setting stays
  std::string wait_policy;      // "" when not set by launch
  std::string note;
};
LaunchThreadEnv launch_thread_env(const ThreadSettings& s, const CpuBudget& budget, int local_ranks, int world_size);

// The budget tools/launch plans its ranks from, given its own (read_cpu_budget() in
// launch): launch's affinity mask (taskset, a batch system's binding of the launcher) is
// the pool all its ranks share, not one rank's binding; the cgroup quota stays; with
// --bind cores each rank owns `bound_cpus` of the pool (0: not bound).
CpuBudget launcher_budget(const CpuBudget& launcher, int bound_cpus);

}  // namespace dpt
