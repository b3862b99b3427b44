#include "tools/launch/process_io.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>
#include <utility>
#include <cstring>

namespace launch {

void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // our own stdout is gone: nothing sensible to do
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void say(const std::string& s) { write_all(2, "launch: " + s + "\n"); }

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + signal_text(WTERMSIG(status));
  return "ended with status " + std::to_string(status);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

void emit_lines(Stream& s, const std::string& prefix, bool flush_all) {
  size_t start = 0;
  std::string out;
  for (;;) {
    size_t nl = s.partial.find('\n', start);
    if (nl == std::string::npos) break;
    out += prefix;
    out.append(s.partial, start, nl - start + 1);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  // A very long line without a newline is emitted in pieces rather than held forever.
  if (!s.partial.empty() && (flush_all || s.partial.size() > (1u << 20))) {
    out += prefix + s.partial + "\n";
    s.partial.clear();
  }
  if (!out.empty()) write_all(s.out_fd, out);
}

namespace {

// Whether nothing on this host listens on (or is bound to) `port`, any address.
bool bindable(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// The kernel's range for outgoing connections' local ports (32768-60999 by default).
std::pair<int, int> ephemeral_range() {
  int lo = 32768, hi = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768, hi = 60999;
    std::fclose(f);
  }
  return {lo, hi};
}

}  // namespace

// The port is closed again before rank 0 binds it, so it must be one nobody else is
// handed meanwhile: a port the kernel picked for us (bind to 0) is from the ephemeral
// range, which every outgoing connect() on the host draws from too; under a parallel
// test run another job's connection took it in that gap. So: a random bindable port
// below the ephemeral range (10000 and up); the kernel's choice only if there is none.
int free_port() {
  const int first = 10000, last = ephemeral_range().first - 1;
  if (last - first >= 1000) {
    std::random_device rd;
    std::mt19937 gen(rd());
    std::uniform_int_distribution<int> pick(first, last);
    for (int attempt = 0; attempt < 64; ++attempt)
      if (const int p = pick(gen); bindable(p)) return p;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

}  // namespace launch
