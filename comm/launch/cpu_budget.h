#pragma once
// The cores a process may really use, which is rarely the number of CPUs the machine has:
// a launcher may bind it to a few (its affinity mask: mpirun --bind-to core, launch --bind
// cores, taskset), and a container may cap it (cgroup cpuset, or a CPU quota: docker
// --cpus, Kubernetes limits, Slurm's cgroup plugin). Thread counts are planned from this
// (comm/launch/thread_plan.h), never from std::thread::hardware_concurrency(), which counts the
// machine's CPUs and ignores all three.
//
// Terms:
//   online    CPUs the kernel has online (sysconf(_SC_NPROCESSORS_ONLN)).
//   affinity  CPUs in this process's affinity mask (sched_getaffinity).
//   cpuset    CPUs of the process's cgroup (cgroup v2 cpuset.cpus.effective, v1
//             cpuset.cpus); online when there is none.
//   quota     the tightest CPU quota on the cgroup's path (v2 cpu.max, v1
//             cpu.cfs_quota_us / cpu.cfs_period_us), in CPUs; 0 when unlimited.
//   host      the cores every rank of this host shares: cpuset, capped by the quota
//             (rounded up: a quota of 1.5 CPUs gives 2 threads something to do).
//   bound     the affinity mask is smaller than the host's cores: the launcher gave
//             this process cores of its own.
#include <string>
#include <string_view>

namespace dpt {

struct CpuBudget {
  int online = 1;
  int affinity = 1;
  int cpuset = 1;
  double quota = 0;
  int host = 1;
  bool bound() const { return affinity < host; }
  // "2 cores (affinity 2 of 2 online)", "4 cores (cgroup quota 4.0 CPUs of 16 online)", ...
  std::string text() const;
};

// Reads /proc and /sys of this process. Never throws: a file that cannot be read means
// no such limit.
CpuBudget read_cpu_budget();

// Where the cgroup limits are read from: this process's by default; a test points them at
// made-up files (tests/comm/cpu_budget_files_test.cpp).
struct CgroupFiles {
  std::string proc_cgroup = "/proc/self/cgroup";  // "0::/a/b" (v2), "4:cpu,cpuacct:/a/b" (v1)
  std::string mount = "/sys/fs/cgroup";           // v2's files, v1's controllers' folders below it
};
// The cgroup's limits alone: its cpuset's CPUs (0: none found) and the tightest quota on
// its path, in CPUs (0: none).
struct CgroupLimits {
  int cpuset = 0;
  double quota = 0;
};
CgroupLimits read_cgroup_limits(const CgroupFiles& files = {});

// The pieces, for tests: combine() fills host from the others; parse_cpu_list counts a
// kernel CPU list ("0-3,8,10-11" -> 7; -1 when malformed); parse_cpu_max reads cgroup v2
// cpu.max ("max 100000" -> 0, "150000 100000" -> 1.5; -1 when malformed). A quota of 0
// (the kernel never writes one: its least is 1000 us) is the tightest limit there is, not
// none: a value above 0 too small to give a whole CPU, so the host gets 1 core.
CpuBudget combine_cpu_budget(int online, int affinity, int cpuset, double quota);
int parse_cpu_list(std::string_view list);
double parse_cpu_max(std::string_view text);

}  // namespace dpt
