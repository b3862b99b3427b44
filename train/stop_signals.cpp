#include "train/stop_signals.h"

#include <csignal>

namespace dpt {

namespace {

// Only a lock-free atomic is async-signal-safe to write from a handler.
volatile std::sig_atomic_t g_signal = 0;

extern "C" void record_stop_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: a read or a poll the signal interrupts carries on (the communicators'
  // waits are bounded anyway); the step finishes and the boundary after it stops.
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

int stop_signal() { return int(g_signal); }

void raise_stop_signal_for_test(int sig) { record_stop_signal(sig); }

}  // namespace dpt
