#include "tools/launch/cpu_binding.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <tuple>

#include "comm/launch/cpu_budget.h"
#include "comm/launch/env.h"
#include "comm/launch/thread_plan.h"
#include "tools/launch/process_io.h"

namespace launch {
namespace {

int read_topology(int cpu, const char* what) {
  std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + what);
  int v = 0;
  return f >> v ? v : 0;
}

// The CPUs of launch's own mask, hyperthreads of one core next to each other.
std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<std::tuple<int, int, int>> order;  // package, core, cpu
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) order.emplace_back(read_topology(c, "physical_package_id"), read_topology(c, "core_id"), c);
  std::sort(order.begin(), order.end());
  std::vector<int> cpus;
  for (const auto& t : order) cpus.push_back(std::get<2>(t));
  return cpus;
}

std::string list_text(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return s;
}

}  // namespace

std::vector<std::vector<int>> plan_binding(const Options& o) {
  std::vector<std::vector<int>> out(size_t(o.nproc));
  if (o.bind != "cores") return out;
  const std::vector<int> cpus = usable_cpus();
  if (cpus.empty()) return out;
  const size_t per = std::max<size_t>(1, cpus.size() / size_t(o.nproc));
  for (size_t l = 0; l < out.size(); ++l)
    for (size_t i = 0; i < per; ++i) out[l].push_back(cpus[(l * per + i) % cpus.size()]);
  return out;
}

std::string binding_text(const Options& o, const std::vector<std::vector<int>>& cpus) {
  std::string s;
  for (size_t l = 0; l < cpus.size(); ++l)
    s += (l ? ", " : "") + std::string("rank ") + std::to_string(o.global_rank(int(l))) + ": CPU" +
         (cpus[l].size() > 1 ? "s " : " ") + list_text(cpus[l]);
  if (size_t(o.nproc) > usable_cpus().size()) s += " (more ranks than CPUs: some share)";
  return s;
}

bool bind_this_process(const std::vector<int>& cpus) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

bool set_thread_env(const Options& o) {
  // One rank per host plans the host's cores for itself (train does; Python's libraries
  // take every core anyway): nothing to set, nothing to say.
  if (o.nproc == 1 && o.bind != "cores") return true;
  try {
    const int bound = o.bind == "cores" ? std::max(1, int(usable_cpus().size()) / o.nproc) : 0;
    const dpt::CpuBudget budget = dpt::launcher_budget(dpt::read_cpu_budget(), bound);
    const dpt::LaunchThreadEnv e =
        dpt::launch_thread_env(dpt::ThreadSettings::from_env(), budget, o.nproc, o.world_max());
    if (!e.omp_num_threads.empty()) {
      ::setenv("OMP_NUM_THREADS", e.omp_num_threads.c_str(), 1);
      ::setenv(dpt::env::kLaunchThreads, e.omp_num_threads.c_str(), 1);
    }
    if (!e.wait_policy.empty()) {
      ::setenv("OMP_WAIT_POLICY", e.wait_policy.c_str(), 1);
      if (!std::getenv("OPENBLAS_THREAD_TIMEOUT")) ::setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
      ::setenv(dpt::env::kWaitSetBy, "launch", 1);
    }
    say("threads: " + e.note);
    return true;
  } catch (const std::invalid_argument& e) {
    say(e.what());
    return false;
  }
}

}  // namespace launch
