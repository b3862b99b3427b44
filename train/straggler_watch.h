#pragma once
// Stragglers named as they happen, at no extra collective: every rank adds two int32
// slots to the agreement the world already makes before a step (a min-allreduce, see
// DistTrainer::agree_on_step), from which every rank learns the slowest and the fastest
// rank's compute time per step since the previous agreement, and which ranks they are.
//
// Terms:
//   compute    a step's forward, backward and update on this rank (its data wait, the
//              gradient sync's wait and the agreement are not compute: a rank waiting
//              for a straggler does not look slow itself), averaged over the last
//              kWindow steps (a single step of a small model is too noisy to compare:
//              scheduler slices, cache misses); sent once kMinSteps are in.
//   code       (round(1024 * log2(microseconds per step)) << 12) | rank: the min of the
//              codes is the fastest rank, the min of the negated codes the slowest; the
//              ratio of their times is 2^((qmax - qmin) / 1024), 0.07% resolution.
//              Ranks >= 4096 do not fit: the watch is off in larger worlds.
//   straggler  the same rank the slowest at a ratio >= the threshold (--straggler-ratio,
//              default 1.5) in `persistence` (8) agreements in a row: named once, in the
//              log and the metrics, with its ratio; cleared after as many below it.
#include <cstdint>
#include <optional>
#include <string>

namespace dpt {

class StragglerWatch {
 public:
  static constexpr int kSlots = 2;
  static constexpr int kWindow = 16, kMinSteps = 4;
  explicit StragglerWatch(double threshold, int persistence = 8);

  void add_compute(double seconds);  // one step's compute on this rank
  // This rank's two slots of the agreement (rank and world of the communicator that
  // agrees, which an elastic re-forming or a switch may change).
  void fill(int32_t* slots, int rank, int world);
  // After the agreement: a line to log when a straggler is named or cleared, else "".
  std::string read(const int32_t* slots, int64_t step);

  struct Straggler {
    int rank = -1;
    double ratio = 0;       // its compute per step over the fastest rank's
    int64_t since_step = 0;
  };
  const std::optional<Straggler>& current() const { return current_; }
  // Forgets the streaks and the named straggler, keeping this rank's own compute times:
  // after an elastic re-forming the ranks are renumbered and a newcomer's watch starts
  // empty, and every member must read the agreements alike (an eviction acts on them).
  void reset_streaks();

 private:
  const double threshold_;
  const int persistence_;
  double window_[kWindow] = {};
  int64_t steps_ = 0;
  int last_slowest_ = -1, streak_ = 0, calm_ = 0;
  int64_t streak_from_ = 0;
  std::optional<Straggler> current_;
};

}  // namespace dpt
