#include "comm/launch/thread_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>

#include "comm/launch/env.h"

namespace dpt {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A positive thread count from a variable's text (libgomp's list form: the first level).
int positive_count(const char* name, const std::string& text) {
  const std::string first = text.substr(0, text.find(','));
  char* end = nullptr;
  const long n = std::strtol(first.c_str(), &end, 10);
  if (first.empty() || *end != '\0' || n < 1 || n > 4096)
    throw std::invalid_argument(std::string(name) + "='" + text +
                                "' is not a thread count (a whole number from 1 to 4096)");
  return int(n);
}

bool wait_policy_passive(const std::string& text) {
  std::string v;
  for (char c : text) v += char(std::tolower(static_cast<unsigned char>(c)));
  if (v == "passive") return true;
  if (v == "active") return false;
  throw std::invalid_argument("OMP_WAIT_POLICY='" + text + "' is not ACTIVE or PASSIVE");
}

std::string ranks_text(int local_ranks) {
  return std::to_string(local_ranks) + (local_ranks == 1 ? " rank" : " ranks") + " on this host";
}

// The cores one rank has: its mask when a launcher bound it, else its share of the host.
double cores_per_rank(const CpuBudget& b, int local_ranks) {
  return b.bound() ? double(b.affinity) : double(b.host) / double(std::max(1, local_ranks));
}

}  // namespace

ThreadSettings ThreadSettings::from_env(int flag_threads) {
  ThreadSettings s;
  s.flag_threads = flag_threads;
  s.openblas_num_threads = env_or_empty("OPENBLAS_NUM_THREADS");
  s.omp_num_threads = env_or_empty("OMP_NUM_THREADS");
  s.omp_wait_policy = env_or_empty("OMP_WAIT_POLICY");
  s.launch_threads = env_or_empty(env::kLaunchThreads);
  return s;
}

ThreadPlan plan_threads(const ThreadSettings& s, const CpuBudget& b, int local_ranks, int world_size) {
  local_ranks = std::max(1, local_ranks);
  ThreadPlan p;
  if (s.flag_threads < 0) throw std::invalid_argument("--threads " + std::to_string(s.flag_threads) + ": needs 1 or more");
  if (s.flag_threads > 0) {
    p.threads = s.flag_threads;
    p.threads_why = "--threads " + std::to_string(s.flag_threads);
  } else if (!s.openblas_num_threads.empty()) {
    p.threads = positive_count("OPENBLAS_NUM_THREADS", s.openblas_num_threads);
    p.threads_why = "OPENBLAS_NUM_THREADS=" + s.openblas_num_threads;
  } else if (!s.omp_num_threads.empty()) {
    p.threads = positive_count("OMP_NUM_THREADS", s.omp_num_threads);
    p.threads_why = "OMP_NUM_THREADS=" + s.omp_num_threads +
                    (s.launch_threads == s.omp_num_threads ? ", set by launch: " + b.text() + " / " + ranks_text(local_ranks)
                                                           : "");
  } else {
    p.threads = std::max(1, std::min(b.affinity, b.host / local_ranks));
    p.threads_why = b.text() + " / " + ranks_text(local_ranks);
  }
  const int engine = world_size > 1 ? 1 : 0;
  const double mine = cores_per_rank(b, local_ranks);
  if (!s.omp_wait_policy.empty()) {
    p.passive = wait_policy_passive(s.omp_wait_policy);
    p.wait_from_user = true;
    p.wait_why = "OMP_WAIT_POLICY=" + s.omp_wait_policy;
  } else if (p.threads == 1) {
    p.passive = false;
    p.wait_why = "one thread, no team to wait";
  } else {
    p.passive = p.threads + engine > mine + 1e-9;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%d threads%s %s the %.3g core%s this rank has", p.threads,
                  engine ? " + the comm engine" : "", p.passive ? "exceed" : "fit", mine, mine == 1.0 ? "" : "s");
    p.wait_why = buf;
  }
  return p;
}

std::string ThreadPlan::text() const {
  return std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " per rank (" + threads_why +
         "); waiting " + (threads == 1 && !wait_from_user ? "n/a" : passive ? "passive" : "active") + " (" + wait_why + ")";
}

LaunchThreadEnv launch_thread_env(const ThreadSettings& s, const CpuBudget& b, int local_ranks, int world_size) {
  LaunchThreadEnv e;
  const ThreadPlan p = plan_threads(s, b, local_ranks, world_size);
  const bool user_threads = s.flag_threads > 0 || !s.openblas_num_threads.empty() || !s.omp_num_threads.empty();
  if (!user_threads) e.omp_num_threads = std::to_string(p.threads);
  e.wait_policy = p.wait_env_value();
  if (!e.omp_num_threads.empty())
    e.note = "OMP_NUM_THREADS=" + e.omp_num_threads + " for each rank (" + p.threads_why + "); set it to override";
  else
    e.note = std::to_string(p.threads) + " threads per rank (" + p.threads_why + ")";
  if (!e.wait_policy.empty()) e.note += "; OMP_WAIT_POLICY=" + e.wait_policy + " (" + p.wait_why + ")";
  return e;
}

CpuBudget launcher_budget(const CpuBudget& launcher, int bound_cpus) {
  const CpuBudget pool = combine_cpu_budget(launcher.online, launcher.affinity,
                                            std::min(launcher.cpuset, launcher.affinity), launcher.quota);
  if (bound_cpus <= 0) return pool;
  // Each rank will own its block: plan as a bound rank sees it.
  return combine_cpu_budget(pool.online, bound_cpus, pool.cpuset, pool.quota);
}

}  // namespace dpt
