#pragma once
// Is a process on this host still running? For the shared-memory arena (backends/tcp/shm_arena.h),
// whose ranks have no connection to each other that would close when one dies.
//
// Terms:
//   identity  - what a process writes about itself into shared memory so its peers can
//               recognise it: its pid, its start time (clock ticks since boot, field 22
//               of /proc/<pid>/stat: a pid reused by a later process has another start
//               time) and its pid namespace (the inode of /proc/self/ns/pid: a pid
//               means something only inside the namespace that wrote it).
//   life      - gone: no such process, a zombie, or another process under that pid;
//               alive: the same process, still running; unknown: the observer cannot
//               tell (another pid namespace, /proc unreadable), and must not assume gone.
#include <cstdint>

namespace dpt {

struct ProcessIdentity {
  int32_t pid = 0;
  uint64_t start_ticks = 0;
  uint64_t pid_namespace = 0;
};

enum class ProcessLife { alive, gone, unknown };

ProcessIdentity this_process();
// One read of /proc/<pid>/stat (a few microseconds).
ProcessLife process_life(const ProcessIdentity& id);

}  // namespace dpt
