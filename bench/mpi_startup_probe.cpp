// Open MPI's side of bench/scale_hosts.sh: the same start-up and latency figures as
// tests/backends/tcp_connections_probe, measured on MPI's own calls (MPI_Init,
// MPI_Barrier, MPI_Allreduce), so the two are read off one table. Each rank prints:
//   mpi rank R init_ms A first_ms B rss_kib K ok 1 first_done_at F barrier_us X allreduce4k_us Y sockets S
// init_ms: MPI_Init; first_ms: a barrier and one allreduce of 4 KiB and one of 1 MiB
// (checked exactly); first_done_at: wall clock (ms since the epoch) once they are done;
// barrier_us / allreduce4k_us: the mean of N of each after one unmeasured (--latency N,
// default 5); sockets: socket descriptors held after them. Exit 4 when an allreduce is wrong.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/support/proc_self.h"

namespace {

using Clock = std::chrono::steady_clock;

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Small integers: every sum is exact in float whatever the reduction order.
bool allreduce_is_right(int rank, int size, int count) {
  std::vector<float> in(static_cast<size_t>(count)), out(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) in[size_t(i)] = float(rank % 7) + float(i % 5);
  MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double base = 0;
  for (int r = 0; r < size; ++r) base += r % 7;
  for (int i = 0; i < count; ++i)
    if (out[size_t(i)] != float(base + double(size) * (i % 5))) return false;
  return true;
}

template <class Op>
double us_per(int rounds, Op op) {
  op();
  const auto t = Clock::now();
  for (int i = 0; i < rounds; ++i) op();
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count() / rounds;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--latency" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "mpi_startup_probe: unknown argument '%s' (usage: mpi_startup_probe [--latency N])\n",
                   a.c_str());
      return 2;
    }
  }
  const auto t0 = Clock::now();
  MPI_Init(&argc, &argv);
  const auto t1 = Clock::now();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Barrier(MPI_COMM_WORLD);
  const bool ok = allreduce_is_right(rank, size, 1024) && allreduce_is_right(rank, size, 256 * 1024);
  const auto t2 = Clock::now();
  const double first_done_at = wall_ms();
  double barrier_us = 0, allreduce_us = 0;
  if (rounds > 0) {
    std::vector<float> in(1024, 1.0f), out(1024);
    barrier_us = us_per(rounds, [] { MPI_Barrier(MPI_COMM_WORLD); });
    allreduce_us =
        us_per(rounds, [&] { MPI_Allreduce(in.data(), out.data(), 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
  }
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("mpi rank %d init_ms %.1f first_ms %.1f rss_kib %ld ok %d first_done_at %.2f barrier_us %.1f "
              "allreduce4k_us %.1f sockets %d\n",
              rank, ms(t1 - t0), ms(t2 - t1), dpt::proc_self::rss_kib(), int(ok), first_done_at, barrier_us, allreduce_us,
              dpt::proc_self::socket_fds());
  std::fflush(stdout);
  MPI_Finalize();
  return ok ? 0 : 4;
}
