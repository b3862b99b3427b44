#pragma once
// Shared-memory objects of dpt jobs, named after the process that creates them, so that
// one left behind by a process that died before unlinking it (SIGKILL, OOM killer, a
// crash between shm_open and shm_unlink) can be found and removed.
//
// Terms:
//   owner tag - "<pid namespace inode>.<pid>.<start time>" of the creating process (the
//               start time is field 22 of /proc/<pid>/stat, clock ticks since boot), so a
//               pid reused by another process is not taken for the creator.
//   name      - "/dpt-<owner tag>-<what>": <what> is the creator's own part (job id,
//               communicator, role); shm_object_name() builds it.
//   dead      - the owner tag's pid namespace is ours and its pid is gone, a zombie, or a
//               process with another start time. Objects of another pid namespace (a
//               container sharing /dev/shm) are never judged by their pid.
//   legacy    - "/dpt-<16 hex digits>-..." of builds before owner tags: no owner to ask,
//               so only the node cleanup removes them, and only when no process maps them.
// Every dpt object is unlinked as soon as every user has mapped it; a name still there
// whose creator is dead can never be opened by a live user that needs it (its creator's
// peers fail with it), so reclaiming it is always safe.
#include <cstdint>
#include <string>
#include <vector>

namespace dpt {

// This process's owner tag (computed once).
const std::string& shm_owner_tag();

// "/dpt-<owner tag>-<what>", for shm_open.
std::string shm_object_name(const std::string& what);

struct ShmReclaim {
  std::vector<std::string> removed;  // names (without the leading '/')
  uint64_t removed_bytes = 0;        // their allocated bytes (what /dev/shm got back)
  int live = 0;                      // kept: the creator runs (or legacy and mapped)
  int foreign = 0;                   // kept: another pid namespace's
};

// Removes the dpt objects in `dir` whose creator is dead; with `legacy_unmapped`, also
// legacy ones that no process of ours maps (scans /proc/*/maps: for the node cleanup,
// not for every job). Never throws; an object it cannot remove is counted as live.
ShmReclaim reclaim_dead_shm(bool legacy_unmapped = false, const std::string& dir = "/dev/shm");

}  // namespace dpt
