// physical_limits: what this machine allows at most, to read the comm_bench figures
// against (compare.sh runs it first and puts its lines into results.md).
//   memcpy      one thread copying a buffer: GB/s of bytes copied (cache-resident at
//               256 KiB, from memory at 64 MiB). A shared-memory collective moves every
//               byte through at least one such copy.
//   tcp 1-way   two processes, one loopback TCP connection, one side writing 1 MiB
//               blocks, the other reading: GB/s. Each byte costs two kernel copies.
//   tcp 2-way   the same connection carrying data both ways at once (a 2-rank ring
//               does this): GB/s per direction.
// Sockets get 8 MiB buffers and TCP_NODELAY, as the tcp backend's mesh sets them.
//   compute     the vector units' arithmetic peak (bench/compute_peak.h): fp32 FMA with
//               AVX-512 (zmm) and AVX2 (ymm), bf16 dot products with AVX512-BF16 and AMX,
//               each on 1 thread and on every core, GFLOP/s. A kernel this CPU or OS cannot
//               run says so instead. At most 0.5 s each: they are steady within
//               milliseconds.
//   physical_limits [SECONDS_PER_TEST] [all|io|compute]      (default 1, all)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/compute_peak.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBlock = 1 << 20;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "physical_limits: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

double memcpy_gbps(size_t bytes, double seconds) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  size_t copied = 0;
  const auto t0 = Clock::now();
  do {
    for (int i = 0; i < 8; ++i) {
      std::memcpy(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), bytes);
      copied += bytes;
    }
  } while (seconds_since(t0) < seconds);
  const double gbps = double(copied) / seconds_since(t0) / 1e9;
  if (a[bytes / 2] == 3) std::puts("");  // keeps the copies observable
  return gbps;
}

void tune(int fd) {
  int one = 1, buf = 8 << 20;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

// Writes (or reads) 1 MiB blocks until `seconds` passed; returns bytes moved.
size_t pump(int fd, bool write_side, double seconds) {
  std::vector<char> block(kBlock, 7);
  size_t moved = 0;
  const auto t0 = Clock::now();
  for (;;) {
    if (write_side && seconds_since(t0) >= seconds) break;
    ssize_t r = write_side ? ::send(fd, block.data(), block.size(), MSG_NOSIGNAL) : ::recv(fd, block.data(), block.size(), 0);
    if (r == 0) break;  // reader: the writer finished
    if (r < 0) {
      if (errno == EINTR) continue;
      if (!write_side) break;
      die("send");
    }
    moved += size_t(r);
  }
  if (write_side) ::shutdown(fd, SHUT_WR);
  return moved;
}

// GB/s per direction over loopback TCP, one way or both ways at once.
double tcp_gbps(bool both_ways, double seconds) {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) die("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 1) != 0 ||
      ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    die("listen on 127.0.0.1");
  int pipefd[2];
  if (::pipe(pipefd) != 0) die("pipe");
  const pid_t child = ::fork();
  if (child < 0) die("fork");
  if (child == 0) {  // the peer: reads (and, both ways, also writes)
    ::close(pipefd[0]);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    tune(fd);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("connect");
    std::thread writer;
    if (both_ways) writer = std::thread([&] { pump(fd, true, seconds); });
    pump(fd, false, seconds);
    if (writer.joinable()) writer.join();
    ::_exit(0);
  }
  ::close(pipefd[1]);
  int fd = ::accept(lfd, nullptr, nullptr);
  if (fd < 0) die("accept");
  tune(fd);
  size_t received = 0;
  std::thread reader;
  const auto t0 = Clock::now();
  if (both_ways) reader = std::thread([&] { received = pump(fd, false, seconds); });
  const size_t sent = pump(fd, true, seconds);
  if (reader.joinable()) reader.join();
  const double s = seconds_since(t0);
  ::close(fd);
  ::close(lfd);
  int status = 0;
  ::waitpid(child, &status, 0);
  return double(both_ways ? std::min(sent, received) : sent) / s / 1e9;
}

void print_compute_peaks(double seconds) {
  using dpt::bench::Peak;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  const auto& f = dpt::cpu_features();
  std::printf("# cpu: fp32 level %s; avx512f %d avx512_bf16 %d amx_tile %d amx_bf16 %d\n",
              dpt::simd_level_name(f.fp32_level()), f.avx512f, f.avx512_bf16, f.amx_tile, f.amx_bf16);
  for (Peak p : {Peak::fma_zmm, Peak::fma_ymm, Peak::bf16_dot_zmm, Peak::amx_bf16}) {
    if (!dpt::bench::peak_supported(p)) {
      std::printf("%-38s not run: %s\n", dpt::bench::peak_name(p),
                  p == Peak::amx_bf16 && f.amx_tile ? "Linux refused the AMX permission" : "not on this CPU/OS");
      continue;
    }
    for (int threads : {1, cores}) {
      std::printf("%-38s %2d thread%s %9.1f GFLOP/s\n", dpt::bench::peak_name(p), threads, threads == 1 ? " " : "s",
                  dpt::bench::peak_gflops(p, threads, std::min(seconds, 0.5)));
      std::fflush(stdout);
      if (cores == 1) break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  const std::string which = argc > 2 ? argv[2] : "all";
  if (!(seconds > 0) || (which != "all" && which != "io" && which != "compute")) {
    std::fprintf(stderr, "usage: physical_limits [SECONDS_PER_TEST > 0] [all|io|compute]\n");
    return 2;
  }
  std::printf("# physical limits (%u cores online)\n", unsigned(std::thread::hardware_concurrency()));
  if (which != "compute") {
    std::printf("memcpy 256 KiB          %7.2f GB/s\n", memcpy_gbps(256 << 10, seconds));
    std::printf("memcpy 64 MiB           %7.2f GB/s\n", memcpy_gbps(64 << 20, seconds));
    std::printf("tcp loopback 1-way      %7.2f GB/s\n", tcp_gbps(false, seconds));
    std::printf("tcp loopback 2-way      %7.2f GB/s per direction\n", tcp_gbps(true, seconds));
  }
  if (which != "io") print_compute_peaks(seconds);
  return 0;
}
