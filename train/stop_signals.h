#pragma once
// Stopping on a scheduler's signal without losing a step. Slurm sends SIGTERM at a time
// limit, on scancel and on preemption (then SIGKILL after KillWait, 30 s by default), and
// SIGUSR1 ahead of time with `sbatch --signal=USR1@SECONDS`. The handler only records the
// signal; the distributed trainer reads it in its ranks' agreement (DistTrainer::agree_on_step:
// before every step, or under DiLoCo about every --agree-every-s, train/agreement_cadence.h),
// so all ranks stop at the same step boundary even when one rank alone was signalled,
// write a checkpoint there (each rank its shard), and the program exits with
// kExitStoppedBySignal. A second signal changes nothing: the checkpoint being written
// completes, and `latest` moves only once every rank's files are in place, so a SIGKILL
// in the middle leaves the previous checkpoint the one a resume takes.
namespace dpt {

// The exit status after such a stop (BSD's EX_TEMPFAIL: "try again"); an sbatch script
// requeues on it (docs/slurm.md).
inline constexpr int kExitStoppedBySignal = 75;

// Installs the handlers for SIGTERM and SIGUSR1 (a program with somewhere to save calls it;
// without a checkpoint folder the default action, termination, is the right one). Call it
// before starting threads: it blocks both signals in the calling thread, so in every thread
// started after it, and takes them on a thread of its own (sigwait), so no handler runs
// inside a compute kernel (oneDNN 2.6's, see stop_signals.cpp).
void install_stop_signals();
// 0, or the first of those signals this process received.
int stop_signal();
// Test hook: as if `sig` had arrived.
void raise_stop_signal_for_test(int sig);

}  // namespace dpt
