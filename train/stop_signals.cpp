#include "train/stop_signals.h"

#include <pthread.h>

#include <csignal>
#include <thread>

namespace dpt {

namespace {

// Only a lock-free atomic is async-signal-safe to write from a handler.
volatile std::sig_atomic_t g_signal = 0;

extern "C" void record_stop_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

}  // namespace

void install_stop_signals() {
  // The handler, for threads started before this call (OpenBLAS starts its pool when it
  // loads): they run no oneDNN kernels (below), so a handler there is harmless.
  struct sigaction sa {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: a read or a poll the signal interrupts carries on (the communicators'
  // waits are bounded anyway); the step finishes and the boundary after it stops.
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  // No handler may run on a thread that computes: oneDNN 2.6's JIT sgemm kernels
  // (jit_avx512_common_gemm_f32) point the stack pointer into a heap workspace while they
  // run, and the kernel writes a signal frame there, corrupting the heap (oneDNN issue 4845,
  // fixed in 3.x; seen here as `corrupted size vs. prev_size` after a SIGTERM). So the
  // signals are blocked in this thread, and every thread it starts from now on inherits
  // that (the comm engines, oneDNN's OpenMP team), and one thread that computes nothing
  // takes them with sigwait.
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) == 0) record_stop_signal(sig);
    }
  }).detach();
}

int stop_signal() { return int(g_signal); }

void raise_stop_signal_for_test(int sig) { record_stop_signal(sig); }

}  // namespace dpt
