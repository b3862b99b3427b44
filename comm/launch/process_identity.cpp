#include "comm/launch/process_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dpt {
namespace {

struct StatLine {
  char state = '?';
  uint64_t start_ticks = 0;
};

// -1: no such process; 0: unreadable or unparsable; 1: read.
int read_stat(int32_t pid, StatLine& out) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? -1 : 0;
  char buf[1024];
  ssize_t n;
  do n = ::read(fd, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n < 0) return err == ESRCH ? -1 : 0;  // the process went away between open and read
  buf[n] = '\0';
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; it ends at the
  // last ')'. After it, field 3 (state) is the first token and field 22 (starttime) the 20th.
  const char* p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ') return 0;
  p += 2;
  out.state = *p;
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return 0;
    ++p;
  }
  char* end = nullptr;
  out.start_ticks = std::strtoull(p, &end, 10);
  return end != p ? 1 : 0;
}

uint64_t own_pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

}  // namespace

ProcessIdentity this_process() {
  ProcessIdentity id;
  id.pid = int32_t(::getpid());
  StatLine s;
  if (read_stat(id.pid, s) == 1) id.start_ticks = s.start_ticks;
  id.pid_namespace = own_pid_namespace();
  return id;
}

ProcessLife process_life(const ProcessIdentity& id) {
  static const uint64_t mine = own_pid_namespace();
  if (id.pid <= 0 || id.start_ticks == 0 || id.pid_namespace == 0 || id.pid_namespace != mine)
    return ProcessLife::unknown;
  StatLine s;
  const int r = read_stat(id.pid, s);
  if (r < 0) return ProcessLife::gone;
  if (r == 0) return ProcessLife::unknown;
  if (s.start_ticks != id.start_ticks || s.state == 'Z' || s.state == 'X' || s.state == 'x') return ProcessLife::gone;
  return ProcessLife::alive;
}

}  // namespace dpt
