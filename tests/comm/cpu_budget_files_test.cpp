// comm/launch/cpu_budget.h's cgroup reader on made-up cgroup v1 and v2 trees (what
// docker --cpus, Kubernetes limits and Slurm's cgroup plugin write), and the budget
// tools/launch plans its ranks from (launcher_budget): a quota lost on the way gives each
// of 2 ranks 32 threads under `docker --cpus 2` on a 64-core host. This machine's own
// files and masks are tests/tools/threads_per_rank.sh's.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "comm/launch/cpu_budget.h"
#include "comm/launch/thread_plan.h"
#include "tests/support/temp_dir.h"

using namespace dpt;

namespace {

// A fake /proc/self/cgroup and cgroup mount under a scratch folder.
struct FakeCgroup {
  dpt::testing::TempDir dir{"cgroup"};
  CgroupFiles files{dir.file("proc_self_cgroup"), dir.file("mount")};
  explicit FakeCgroup(const std::string& proc_cgroup) { put("../proc_self_cgroup", proc_cgroup); }
  // Writes `text` to the file at `path` below the mount.
  void put(const std::string& path, const std::string& text) const {
    const std::filesystem::path p = std::filesystem::path(files.mount) / path;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  CgroupLimits read() const { return read_cgroup_limits(files); }
};

ThreadSettings none() { return ThreadSettings{}; }

}  // namespace

TEST_CASE("cgroup v2: the tightest cpu.max on the path and the cpuset", "[threads]") {
  FakeCgroup c("0::/job/step");
  c.put("cpu.max", "max 100000");
  c.put("job/cpu.max", "200000 100000");  // docker --cpus 2, on the parent
  c.put("job/step/cpu.max", "max 100000");
  c.put("job/step/cpuset.cpus.effective", "0-63");
  CgroupLimits l = c.read();
  CHECK(l.quota == Approx(2.0));
  CHECK(l.cpuset == 64);
  const CpuBudget b = combine_cpu_budget(64, 64, l.cpuset, l.quota);
  CHECK(b.host == 2);
  // What launch -n 2 gives each rank there (a zero quota passed on: 32).
  CHECK(launch_thread_env(none(), launcher_budget(b, 0), 2, 2).omp_num_threads == "1");
  CHECK(plan_threads(none(), b, 1, 1).threads == 2);
  c.put("job/step/cpu.max", "150000 100000");  // a tighter one below: 1.5 CPUs, 2 threads
  l = c.read();
  CHECK(l.quota == Approx(1.5));
  CHECK(combine_cpu_budget(64, 64, l.cpuset, l.quota).host == 2);
}

TEST_CASE("cgroup: a zero quota is the tightest, never none; unlimited and missing files are none", "[threads]") {
  FakeCgroup c("0::/ctr");
  c.put("ctr/cpu.max", "0 100000");
  CgroupLimits l = c.read();
  CHECK(l.quota > 0);  // 0 would read as no quota
  const CpuBudget b = combine_cpu_budget(64, 64, 0, l.quota);
  CHECK(b.host == 1);  // and never 0 cores
  CHECK(launch_thread_env(none(), launcher_budget(b, 0), 2, 2).omp_num_threads == "1");
  c.put("ctr/cpu.max", "max 100000");
  CHECK(c.read().quota == 0.0);
  c.put("ctr/cpu.max", "what 100000");  // malformed: no limit, no exception
  CHECK(c.read().quota == 0.0);
  FakeCgroup empty("0::/");
  l = empty.read();
  CHECK(l.quota == 0.0);
  CHECK(l.cpuset == 0);
  CHECK(combine_cpu_budget(8, 8, l.cpuset, l.quota).host == 8);
}

TEST_CASE("cgroup v1: cfs quota over period on the cpu controller's path, cpuset.cpus", "[threads]") {
  FakeCgroup c("11:cpuset:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n");
  c.put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1");
  c.put("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
  c.put("cpu,cpuacct/docker/cpu.cfs_quota_us", "300000");
  c.put("cpu,cpuacct/docker/cpu.cfs_period_us", "100000");
  c.put("cpuset/docker/abc/cpuset.cpus", "0-3,8");
  const CgroupLimits l = c.read();
  CHECK(l.quota == Approx(3.0));
  CHECK(l.cpuset == 5);
  CHECK(combine_cpu_budget(16, 16, l.cpuset, l.quota).host == 3);
  c.put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "0");
  CHECK(combine_cpu_budget(16, 16, 0, c.read().quota).host == 1);
}

TEST_CASE("cgroup: inside a container the recorded path lies outside the mount, whose root is its own", "[threads]") {
  FakeCgroup c("0::/kubepods/pod1/ctr");
  c.put("cpu.max", "400000 100000");
  c.put("cpuset.cpus.effective", "0-7");
  const CgroupLimits l = c.read();
  CHECK(l.quota == Approx(4.0));
  CHECK(l.cpuset == 8);
}

TEST_CASE("launch's budget: its own mask is its ranks' pool, the quota stays, --bind cores gives each its block",
          "[threads]") {
  // taskset -c 0-3 launch -n 2 on 64 cores: 2 threads each, not 32.
  const CpuBudget masked = combine_cpu_budget(64, 4, 0, 0);
  CHECK(launcher_budget(masked, 0).host == 4);
  CHECK(launch_thread_env(none(), launcher_budget(masked, 0), 2, 2).omp_num_threads == "2");
  // --bind cores on 64 cores: each of 2 ranks owns 32.
  const CpuBudget all = combine_cpu_budget(64, 64, 0, 0);
  CHECK(launch_thread_env(none(), launcher_budget(all, 32), 2, 2).omp_num_threads == "32");
  // --bind cores under docker --cpus 2: the quota still caps each block.
  const CpuBudget quota = combine_cpu_budget(64, 64, 0, 2.0);
  CHECK(launcher_budget(quota, 32).quota == Approx(2.0));
  CHECK(launch_thread_env(none(), launcher_budget(quota, 32), 2, 2).omp_num_threads == "1");
}
