// core_to_core: the shared-memory bandwidth between two processes pinned to two CPUs, once
// a second, to see where it changes under a job. Each round, one side writes its 1 MiB and
// reads the other's (what the shared-memory allreduce of two ranks does), then hands over.
// On this 2-vCPU VM it flips between ~21 and ~4.3 GB/s in the middle of a run with nothing
// else changing (the host moving a vCPU to a core further away): the two modes of the Quick
// start's comm time (0.4-0.6 s or 1.4-1.5 s per run) in bench/results/defaults.
//   core_to_core [SECONDS=20] [CPU_A=0] [CPU_B=1]
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 20.0;
  const int cpus[2] = {argc > 2 ? std::atoi(argv[2]) : 0, argc > 3 ? std::atoi(argv[3]) : 1};
  constexpr size_t kBytes = size_t(1) << 20;
  void* m = ::mmap(nullptr, 4096 + 2 * kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return std::perror("mmap"), 1;
  auto* turn = new (m) std::atomic<int>(0);  // even: side 0 goes, odd: side 1; -1: stop
  char* halves[2] = {static_cast<char*>(m) + 4096, static_cast<char*>(m) + 4096 + kBytes};
  std::memset(halves[0], 1, 2 * kBytes);
  const pid_t child = ::fork();
  const int me = child == 0 ? 1 : 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[me], &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) std::perror("sched_setaffinity");
  std::vector<char> local(kBytes, char(2 + me));
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto last = t0;
  long rounds = 0;
  if (me == 0) std::printf("# cpus %d and %d, 1 MiB each way per round\n", cpus[0], cpus[1]);
  for (;;) {
    int t;
    while ((t = turn->load(std::memory_order_acquire)) >= 0 && t % 2 != me) {
    }
    if (t < 0) break;
    std::memcpy(halves[me], local.data(), kBytes);      // write mine
    std::memcpy(local.data(), halves[1 - me], kBytes);  // read the other's
    if (me == 0) {
      ++rounds;
      const auto now = Clock::now();
      const double dt = std::chrono::duration<double>(now - last).count();
      if (dt >= 1.0) {
        // Both sides' rounds: 2 MiB written and 2 MiB read per pair.
        std::printf("%6.1f s  %6.2f GB/s\n", std::chrono::duration<double>(now - t0).count(),
                    double(rounds) * 4.0 * double(kBytes) / dt / 1e9);
        std::fflush(stdout);
        rounds = 0;
        last = now;
      }
      if (std::chrono::duration<double>(now - t0).count() >= seconds) {
        turn->store(-1, std::memory_order_release);
        break;
      }
    }
    turn->fetch_add(1, std::memory_order_acq_rel);
  }
  if (child > 0) ::waitpid(child, nullptr, 0);
  return 0;
}
