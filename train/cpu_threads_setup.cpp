#include "train/cpu_threads_setup.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "comm/launch/env.h"
#include "comm/launch/launch_env.h"
#include "models/kernels/cpu/gemm.h"

namespace dpt {
namespace {

// Who put OMP_WAIT_POLICY in the environment when it was not the user: tools/launch or
// our own re-exec (DPT_WAIT_SET_BY), so the printed reason names them.
void name_wait_setter(ThreadPlan& p) {
  const char* by = std::getenv(env::kWaitSetBy);
  if (!by || !p.wait_from_user) return;
  p.wait_why += std::string(", set by ") + by;
}

}  // namespace

ThreadPlan current_thread_plan(int flag_threads) {
  const LaunchInfo li = detect_launch();
  ThreadPlan p = plan_threads(ThreadSettings::from_env(flag_threads), read_cpu_budget(), li.local_size, li.world_size);
  name_wait_setter(p);
  return p;
}

ThreadPlan setup_cpu_threads(char** argv, int flag_threads) {
  ThreadPlan p = current_thread_plan(flag_threads);
  const std::string wait = p.wait_env_value();
  if (!wait.empty() && argv && !std::getenv(env::kNoReexec)) {
    ::setenv("OMP_WAIT_POLICY", wait.c_str(), 1);
    if (!std::getenv("OPENBLAS_THREAD_TIMEOUT")) ::setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    ::setenv(env::kWaitSetBy, "this program (re-executed so that libgomp and OpenBLAS read it)", 1);
    std::fflush(nullptr);
    ::execv("/proc/self/exe", argv);
    // Still here: carry on spinning, and say why.
    std::fprintf(stderr, "warning: could not re-execute with OMP_WAIT_POLICY=%s (%s); threads may spin\n",
                 wait.c_str(), std::strerror(errno));
  }
  set_blas_threads(p.threads);
  return p;
}

}  // namespace dpt
