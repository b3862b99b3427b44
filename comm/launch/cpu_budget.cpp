#include "comm/launch/cpu_budget.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dpt {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

// The cgroup paths of this process: v2's unified path ("0::/a/b") and v1's cpu and
// cpuset controllers' paths, from /proc/self/cgroup.
struct CgroupPaths {
  std::string unified, cpu, cpuset;
};

CgroupPaths read_cgroup_paths(const std::string& proc_cgroup) {
  CgroupPaths p;
  std::ifstream f(proc_cgroup);
  std::string line;
  while (std::getline(f, line)) {
    const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) p.unified = path;
    std::stringstream names(controllers);
    for (std::string c; std::getline(names, c, ',');) {
      if (c == "cpu") p.cpu = path;
      if (c == "cpuset") p.cpuset = path;
    }
  }
  return p;
}

// Each directory from the process's cgroup up to the root, under `mount`. Inside a
// container the recorded path may lie outside what is mounted: then the mount's root
// is the container's own cgroup.
std::vector<std::string> cgroup_dirs(const std::string& mount, std::string path) {
  std::vector<std::string> dirs;
  for (;;) {
    const std::string dir = mount + (path == "/" ? "" : path);
    if (access(dir.c_str(), F_OK) == 0) dirs.push_back(dir);
    if (path.empty() || path == "/") break;
    const auto slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  if (dirs.empty()) dirs.push_back(mount);
  return dirs;
}

// The tightest quota on the path, in CPUs (0: none).
double read_quota(const CgroupPaths& p, const std::string& mount) {
  double tightest = 0;
  auto take = [&](double q) {
    if (q > 0 && (tightest == 0 || q < tightest)) tightest = q;
  };
  for (const std::string& dir : cgroup_dirs(mount, p.unified))
    take(parse_cpu_max(read_first_line(dir + "/cpu.max")));
  if (!p.cpu.empty())
    for (const char* controller : {"/cpu,cpuacct", "/cpu"})
      for (const std::string& dir : cgroup_dirs(mount + controller, p.cpu)) {
        const std::string quota = read_first_line(dir + "/cpu.cfs_quota_us");
        const std::string period = read_first_line(dir + "/cpu.cfs_period_us");
        if (quota.empty() || period.empty()) continue;
        take(parse_cpu_max(quota + " " + period));
      }
  return tightest;
}

// CPUs of the process's cpuset (0: none found).
int read_cpuset(const CgroupPaths& p, const std::string& mount) {
  const std::string v2 = cgroup_dirs(mount, p.unified).front() + "/cpuset.cpus.effective";
  int n = parse_cpu_list(read_first_line(v2));
  if (n > 0) return n;
  if (!p.cpuset.empty()) {
    n = parse_cpu_list(read_first_line(cgroup_dirs(mount + "/cpuset", p.cpuset).front() + "/cpuset.cpus"));
    if (n > 0) return n;
  }
  return 0;
}

}  // namespace

int parse_cpu_list(std::string_view list) {
  while (!list.empty() && (list.back() == '\n' || list.back() == ' ')) list.remove_suffix(1);
  if (list.empty()) return -1;
  int count = 0;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item(list.substr(pos, comma - pos));
    int lo = 0, hi = 0;
    char extra = 0;
    if (std::sscanf(item.c_str(), "%d-%d%c", &lo, &hi, &extra) == 2) {
    } else if (std::sscanf(item.c_str(), "%d%c", &lo, &extra) == 1) {
      hi = lo;
    } else {
      return -1;
    }
    if (lo < 0 || hi < lo) return -1;
    count += hi - lo + 1;
    pos = comma + 1;
  }
  return count;
}

double parse_cpu_max(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || period <= 0) return -1;
  if (quota == "max" || quota == "-1") return 0;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (*end || q < 0) return -1;
  if (q == 0) return 1 / period;  // below any real quota (at least 1000 us): 1 core, never "none" (0)
  return q / period;
}

CpuBudget combine_cpu_budget(int online, int affinity, int cpuset, double quota) {
  CpuBudget b;
  b.online = std::max(1, online);
  b.affinity = std::max(1, affinity);
  b.cpuset = cpuset > 0 ? std::min(cpuset, b.online) : b.online;
  b.quota = quota > 0 ? quota : 0;
  b.host = b.cpuset;
  if (b.quota > 0) b.host = std::max(1, std::min(b.host, int(std::ceil(b.quota - 1e-9))));
  // A mask wider than the host's share (a quota, not a cpuset, limits it) is no binding.
  b.affinity = std::min(b.affinity, std::max(b.host, 1));
  return b;
}

CpuBudget read_cpu_budget() {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  CPU_ZERO(&set);
  const int affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : int(online);
  const CgroupLimits cgroup = read_cgroup_limits();
  return combine_cpu_budget(int(online), affinity, cgroup.cpuset, cgroup.quota);
}

CgroupLimits read_cgroup_limits(const CgroupFiles& files) {
  const CgroupPaths paths = read_cgroup_paths(files.proc_cgroup);
  return {read_cpuset(paths, files.mount), read_quota(paths, files.mount)};
}

std::string CpuBudget::text() const {
  char buf[160];
  std::string limits;
  if (cpuset < online) limits += ", CPU set of " + std::to_string(cpuset);  // a cgroup cpuset, or launch's own mask
  if (quota > 0) {
    std::snprintf(buf, sizeof buf, ", cgroup quota %.1f CPUs", quota);
    limits += buf;
  }
  std::snprintf(buf, sizeof buf, "%d core%s on this host (%d online%s)%s", host, host == 1 ? "" : "s", online,
                limits.c_str(), bound() ? (", this process bound to " + std::to_string(affinity)).c_str() : "");
  return buf;
}

}  // namespace dpt
