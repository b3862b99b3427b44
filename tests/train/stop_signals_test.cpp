// train/stop_signals.h: SIGTERM and SIGUSR1 are recorded, and no handler runs on a thread
// that computes. oneDNN 2.6's JIT sgemm points the stack pointer into the heap while it
// runs: a signal handled on that thread writes its frame into the heap (oneDNN issue 4845).
// With the handler on every thread, the storm below aborts in free()/malloc() within a
// second ("free(): invalid pointer"); with the signals taken by one sigwait thread, never.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include "models/kernels/cpu/gemm.h"
#include "train/stop_signals.h"

using namespace dpt;

namespace {

bool blocked_here(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

}  // namespace

TEST_CASE("stop signals: taken off the compute threads, recorded, and oneDNN survives a storm of them",
          "[stop_signals]") {
  install_stop_signals();
  CHECK(blocked_here(SIGTERM));
  CHECK(blocked_here(SIGUSR1));
  bool in_new_thread = false;
  std::thread([&] { in_new_thread = blocked_here(SIGTERM) && blocked_here(SIGUSR1); }).join();
  CHECK(in_new_thread);  // inherited: comm engines, oneDNN's OpenMP team

  CHECK(stop_signal() == 0);
  ::kill(::getpid(), SIGUSR1);  // process-directed, as scancel, launch and srun send it
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (stop_signal() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(stop_signal() == SIGUSR1);

  if (!gemm_engine_available(GemmEngine::onednn)) {
    WARN("no oneDNN in this build: the storm is not run");
    return;
  }
  // Products on oneDNN's JIT sgemm (one thread, as a rank among others runs them), heap
  // traffic beside them, and SIGTERM every 50 us at the process.
  std::atomic<bool> done{false};
  std::atomic<int> sent{0};
  std::thread sender([&] {
    while (!done) {
      ::kill(::getpid(), SIGTERM);
      sent.fetch_add(1);
      ::usleep(50);
    }
  });
  const int saved = blas_threads();
  set_blas_threads(1);
  const int m = 2048, n = 128, k = 128;
  std::vector<float> a(size_t(m) * k, 0.01f), b(size_t(k) * n, 0.02f), c(size_t(m) * n);
  volatile float sink = 0;
  for (int it = 0; it < 800; ++it) {
    sgemm_with(GemmEngine::onednn, false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    sgemm_with(GemmEngine::onednn, false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
    std::vector<float> churn(size_t(1000 + it % 100), 1.0f);
    sink = sink + churn.back();
  }
  done = true;
  sender.join();
  set_blas_threads(saved);
  INFO(sent.load() << " signals sent");
  CHECK(sent.load() > 100);
  CHECK(c[0] == Approx(0.01f * 0.02f * k));
  CHECK(stop_signal() == SIGUSR1);  // the first one stays
}
