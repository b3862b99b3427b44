#pragma once
// What this process holds, read from /proc/self: its socket descriptors and its resident
// memory. Shared by the start-up probes of the tcp backend
// (tests/backends/tcp_connections_probe.cpp) and of Open MPI (bench/mpi_startup_probe.cpp),
// so both tables count the same way. Header-only: the MPI probe links nothing of dpt.
#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace dpt::proc_self {

// Socket descriptors open in this process (-1 when /proc/self/fd cannot be read).
inline int socket_fds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = ::readdir(d)) {
    char target[64] = {0};
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    if (::readlink(path.c_str(), target, sizeof target - 1) > 0 && std::string(target).rfind("socket:", 0) == 0) ++n;
  }
  ::closedir(d);
  return n;
}

// VmRSS in KiB (-1 when /proc/self/status has none).
inline long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      long v = 0;
      f >> v;
      return v;
    }
    f.ignore(1 << 20, '\n');
  }
  return -1;
}

}  // namespace dpt::proc_self
