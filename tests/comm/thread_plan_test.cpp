// comm/launch/cpu_budget.h and comm/launch/thread_plan.h: the cores a process may use, and the threads
// per rank planned from them. Pure functions on made-up budgets, so every case runs on
// every machine; tests/tools/threads_per_rank.sh checks the programs apply the plan.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "comm/launch/cpu_budget.h"
#include "comm/launch/thread_plan.h"

using namespace dpt;

namespace {
ThreadSettings none() { return ThreadSettings{}; }
ThreadSettings omp(const std::string& n) {
  ThreadSettings s;
  s.omp_num_threads = n;
  return s;
}
}  // namespace

TEST_CASE("cpu lists and cgroup cpu.max parse as the kernel writes them", "[threads]") {
  CHECK(parse_cpu_list("0-3,8,10-11\n") == 7);
  CHECK(parse_cpu_list("5") == 1);
  CHECK(parse_cpu_list("") == -1);
  CHECK(parse_cpu_list("3-1") == -1);
  CHECK(parse_cpu_list("a-b") == -1);
  CHECK(parse_cpu_max("max 100000") == 0.0);
  CHECK(parse_cpu_max("150000 100000\n") == Approx(1.5));
  CHECK(parse_cpu_max("0 100000") > 0.0);  // the tightest quota, not "none"
  CHECK(parse_cpu_max("") == -1.0);
  CHECK(parse_cpu_max("x 100000") == -1.0);
}

TEST_CASE("the host's cores: cpuset and quota limit them, a narrower mask is a binding", "[threads]") {
  const CpuBudget plain = combine_cpu_budget(16, 16, 0, 0);
  CHECK(plain.host == 16);
  CHECK_FALSE(plain.bound());
  const CpuBudget quota = combine_cpu_budget(16, 16, 0, 1.5);  // docker --cpus 1.5
  CHECK(quota.host == 2);
  CHECK_FALSE(quota.bound());  // the mask is wider than the quota: no binding
  const CpuBudget cpuset = combine_cpu_budget(16, 4, 4, 0);     // docker --cpuset-cpus 0-3
  CHECK(cpuset.host == 4);
  CHECK_FALSE(cpuset.bound());
  const CpuBudget bound = combine_cpu_budget(2, 1, 0, 0);       // mpirun --bind-to core
  CHECK(bound.bound());
  CHECK(bound.text().find("bound to 1") != std::string::npos);
}

TEST_CASE("threads per rank divide the host's cores among the ranks sharing it", "[threads]") {
  // The Quick start: 2 ranks on 2 cores. A plan that ignores the ranks gives 2 each.
  CHECK(plan_threads(none(), combine_cpu_budget(2, 2, 0, 0), 2, 2).threads == 1);
  CHECK(plan_threads(none(), combine_cpu_budget(2, 2, 0, 0), 1, 1).threads == 2);
  CHECK(plan_threads(none(), combine_cpu_budget(16, 16, 0, 0), 2, 2).threads == 8);
  CHECK(plan_threads(none(), combine_cpu_budget(16, 16, 0, 0), 3, 6).threads == 5);
  CHECK(plan_threads(none(), combine_cpu_budget(2, 2, 0, 0), 4, 4).threads == 1);  // never 0
  CHECK(plan_threads(none(), combine_cpu_budget(16, 16, 0, 1.5), 1, 1).threads == 2);  // the quota, not the CPUs
  // Bound ranks: never more than the mask; a mask shared by several (--bind-to socket)
  // still gets its share only.
  CHECK(plan_threads(none(), combine_cpu_budget(2, 1, 0, 0), 2, 2).threads == 1);
  CHECK(plan_threads(none(), combine_cpu_budget(16, 8, 0, 0), 4, 4).threads == 4);
  CHECK(plan_threads(none(), combine_cpu_budget(16, 4, 0, 0), 2, 2).threads == 4);
  const ThreadPlan p = plan_threads(none(), combine_cpu_budget(2, 2, 0, 0), 2, 2);
  CHECK(p.threads_why.find("2 ranks on this host") != std::string::npos);
  CHECK(p.text().find("1 thread per rank") == 0);
}

TEST_CASE("an explicit setting wins: --threads, then OPENBLAS_NUM_THREADS, then OMP_NUM_THREADS", "[threads]") {
  const CpuBudget b = combine_cpu_budget(2, 2, 0, 0);
  CHECK(plan_threads(omp("3"), b, 2, 2).threads == 3);
  CHECK(plan_threads(omp("3"), b, 2, 2).threads_why == "OMP_NUM_THREADS=3");
  CHECK(plan_threads(omp("4,2"), b, 1, 1).threads == 4);  // libgomp's nested list: its first level
  ThreadSettings s = omp("3");
  s.openblas_num_threads = "5";
  CHECK(plan_threads(s, b, 2, 2).threads == 5);
  s.flag_threads = 7;
  CHECK(plan_threads(s, b, 2, 2).threads == 7);
  // launch's own setting is named as launch's.
  ThreadSettings from_launch = omp("1");
  from_launch.launch_threads = "1";
  CHECK(plan_threads(from_launch, b, 2, 2).threads_why.find("set by launch") != std::string::npos);
  // Malformed values are refused, naming the variable.
  for (const char* bad : {"abc", "0", "-2", "2x", ""}) {
    ThreadSettings t;
    t.openblas_num_threads = bad;
    if (*bad == '\0') continue;  // empty means unset
    CHECK_THROWS_WITH(plan_threads(t, b, 1, 1), Catch::Contains("OPENBLAS_NUM_THREADS='" + std::string(bad) + "'"));
  }
  CHECK_THROWS_WITH(plan_threads(omp("lots"), b, 1, 1), Catch::Contains("OMP_NUM_THREADS='lots'"));
}

TEST_CASE("threads wait passively where they would share cores, and spin where they own them", "[threads]") {
  const CpuBudget two = combine_cpu_budget(2, 2, 0, 0);
  // One thread: no team, nothing to set.
  ThreadPlan p = plan_threads(none(), two, 2, 2);
  CHECK_FALSE(p.passive);
  CHECK(p.wait_env_value().empty());
  // A single process owning both cores: spin.
  p = plan_threads(none(), two, 1, 1);
  CHECK(p.threads == 2);
  CHECK_FALSE(p.passive);
  // Two ranks told to run 2 threads each on 2 cores: passive, and it must be set at load.
  p = plan_threads(omp("2"), two, 2, 2);
  CHECK(p.passive);
  CHECK(p.wait_env_value() == "PASSIVE");
  // One rank per host in a multi-host job, with every core computing: the comm engine's
  // thread needs a core too.
  p = plan_threads(none(), two, 1, 8);
  CHECK(p.threads == 2);
  CHECK(p.passive);
  // Bound ranks with a core to spare for the engine: spin.
  p = plan_threads(omp("2"), combine_cpu_budget(8, 4, 0, 0), 2, 2);
  CHECK_FALSE(p.passive);
  // The user's OMP_WAIT_POLICY wins and is never overwritten.
  ThreadSettings s = omp("2");
  s.omp_wait_policy = "active";
  p = plan_threads(s, two, 2, 2);
  CHECK_FALSE(p.passive);
  CHECK(p.wait_from_user);
  CHECK(p.wait_env_value().empty());
  s.omp_wait_policy = "sometimes";
  CHECK_THROWS_WITH(plan_threads(s, two, 2, 2), Catch::Contains("OMP_WAIT_POLICY='sometimes'"));
}

TEST_CASE("launch sets OMP_NUM_THREADS for its ranks unless the user set a thread count", "[threads]") {
  const CpuBudget two = combine_cpu_budget(2, 2, 0, 0);
  LaunchThreadEnv e = launch_thread_env(none(), two, 2, 2);
  CHECK(e.omp_num_threads == "1");
  CHECK(e.wait_policy.empty());
  CHECK(e.note.find("OMP_NUM_THREADS=1 for each rank") == 0);
  e = launch_thread_env(omp("2"), two, 2, 2);
  CHECK(e.omp_num_threads.empty());  // the user's stays
  CHECK(e.wait_policy == "PASSIVE");
  ThreadSettings ob;
  ob.openblas_num_threads = "1";
  CHECK(launch_thread_env(ob, two, 2, 2).omp_num_threads.empty());
}
