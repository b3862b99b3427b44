#!/usr/bin/env python3
"""The cores this process may use, as tests/tools/threads_per_rank.sh expects them: its
affinity mask (taskset, a batch system's binding; the kernel keeps it inside the cgroup's
cpuset) capped by the tightest cgroup CPU quota on its path, rounded up (docker --cpus
1.5: 2). Written apart from comm/launch/cpu_budget.cpp, so the programs' own reading is
what is tested, not its echo."""
import math
import os


def quotas():
    """Each CPU quota on this process's cgroup path and above, in CPUs (v2 cpu.max, v1
    cpu.cfs_quota_us / cpu.cfs_period_us); "max" and -1 are none."""
    with open("/proc/self/cgroup") as f:
        entries = [line.rstrip("\n").split(":", 2) for line in f if line.count(":") >= 2]
    for _, controllers, path in entries:
        if controllers == "":
            places = [("/sys/fs/cgroup", None)]
        elif "cpu" in controllers.split(","):
            places = [("/sys/fs/cgroup/cpu,cpuacct", "v1"), ("/sys/fs/cgroup/cpu", "v1")]
        else:
            continue
        for mount, v1 in places:
            # From the cgroup up to the mount's root (inside a container, where the path
            # is not mounted, the root is the container's own cgroup).
            here = path
            while True:
                folder = mount + (here if here != "/" else "")
                try:
                    if v1:
                        quota = open(folder + "/cpu.cfs_quota_us").read().strip()
                        period = open(folder + "/cpu.cfs_period_us").read().strip()
                    else:
                        quota, period = open(folder + "/cpu.max").read().split()
                    if quota not in ("max", "-1"):
                        yield int(quota) / int(period)
                except (OSError, ValueError):
                    pass
                if here in ("", "/"):
                    break
                here = here.rsplit("/", 1)[0] or "/"


cores = len(os.sched_getaffinity(0))
print(min([cores] + [max(1, math.ceil(q)) for q in quotas()]))
