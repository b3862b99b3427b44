#pragma once
// The compute threads of a training process, planned and applied before it does any work
// (comm/launch/thread_plan.h says how they are chosen): every program that trains or runs
// products calls setup_cpu_threads first thing in main, before any backend starts.
#include "comm/launch/thread_plan.h"

namespace dpt {

// Plans from --threads (0: not given), the environment, the launcher's variables and the
// cores this process may use; when the plan needs passive waiting and neither
// OMP_WAIT_POLICY nor DPT_NO_REEXEC is set, sets OMP_WAIT_POLICY=PASSIVE and
// OPENBLAS_THREAD_TIMEOUT=4 and re-executes the program (/proc/self/exe with the same
// argv: libgomp and OpenBLAS read them only when loaded; the pid stays, so mpirun and srun
// see the same process). Then sets the BLAS thread count, which oneDNN's team and
// parallel_for follow. Throws std::invalid_argument for a malformed variable.
ThreadPlan setup_cpu_threads(char** argv, int flag_threads);

// The same plan without applying anything (tests, --help texts).
ThreadPlan current_thread_plan(int flag_threads);

}  // namespace dpt
