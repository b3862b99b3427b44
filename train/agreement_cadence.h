#pragma once
// When the distributed trainer's ranks agree before a step (DistTrainer::agree_on_step:
// every rank has its batches, newcomers wait to join, some rank got a stop signal).
//
// Under DDP and ZeRO every step is a collective over all ranks anyway, and they agree
// before each one. DiLoCo's inner groups touch nobody outside their group between round
// ends, and a per-step agreement there is the only thing crossing the slow link between
// rounds: a 16-byte allreduce over every host, ~150 bytes on the wire per host per step
// with frames and TCP/IP headers (measured: 0.06 MiB per host over 400 steps of the
// benchmark in docs/diloco.md, more than half of one bf16 round's payload there).
// So where the strategy allows it (ParallelStrategy::world_must_agree_after), the world
// agrees only
//   - where it must: at the strategy's boundaries (DiLoCo: round ends, where newcomers
//     are admitted), before a step that may find the pass's data ended (every rank knows
//     which: the sampler deals every rank as many samples), and before every step under
//     the uneven-input test hook (a rank's data ends where no other rank can tell);
//   - before the first step of a pass (an epoch, a resume, a new group);
//   - and otherwise about every `interval_s` of training: each agreement also takes the
//     minimum over the ranks of the steps that fit in `interval_s` at each one's pace
//     since the last agreement, so a stop signal (Slurm's SIGTERM: SIGKILL follows
//     after KillWait, 30 s by default) is acted on within about that time by the
//     slowest rank's clock. The decision comes from the allreduce, so every rank skips
//     the same steps.
#include <chrono>
#include <cstdint>

namespace dpt {

class AgreementCadence {
 public:
  // interval_s <= 0: agree before every step.
  explicit AgreementCadence(double interval_s) : interval_s_(interval_s) {}

  // A new pass over the data: the next step's agreement is due.
  void restart() { next_ = -1; }
  // Whether the agreement before the step after `step` is due; `must`: the caller's
  // reasons above (boundary, data end, uneven inputs).
  bool due(int64_t step, bool must) const { return must || interval_s_ <= 0 || step >= next_; }
  using Clock = std::chrono::steady_clock;
  // This rank's proposal for the steps until the next agreement: how many fit in
  // interval_s at its pace since the last one (1 when it has none yet).
  int32_t propose(int64_t step) const { return propose(step, Clock::now()); }
  // The agreement at `step` took place with `steps` (the minimum of the proposals).
  void agreed(int64_t step, int32_t steps) { agreed(step, steps, Clock::now()); }
  // The same at a given time (tests: a pace that does not depend on the machine's load).
  int32_t propose(int64_t step, Clock::time_point now) const;
  void agreed(int64_t step, int32_t steps, Clock::time_point now);
  // Agreements taken so far.
  int64_t count() const { return count_; }

 private:
  double interval_s_;
  int64_t next_ = -1;            // the step after which the next agreement falls due
  int64_t last_step_ = -1;       // the step of the last agreement (-1: none this pass)
  Clock::time_point last_time_{};
  int64_t count_ = 0;
};

}  // namespace dpt
