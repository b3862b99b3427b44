#include "train/straggler_watch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace dpt {
namespace {
constexpr int kRankBits = 12;
constexpr int32_t kQMax = (1 << 19) - 1;  // log2 of 2^512 us: no step is that long
int32_t encode(double us_per_step, int rank) {
  const double q = std::round(1024.0 * std::log2(std::max(us_per_step, 1.0)));
  return (int32_t(std::min<double>(q, kQMax)) << kRankBits) | rank;
}
}  // namespace

StragglerWatch::StragglerWatch(double threshold, int persistence)
    : threshold_(threshold), persistence_(persistence) {}

void StragglerWatch::add_compute(double seconds) { window_[steps_++ % kWindow] = seconds; }

void StragglerWatch::reset_streaks() {
  last_slowest_ = -1;
  streak_ = calm_ = 0;
  streak_from_ = 0;
  current_.reset();
}

void StragglerWatch::fill(int32_t* slots, int rank, int world) {
  // No step since the last agreement (or off): slots that lose both minimums.
  slots[0] = 0;
  slots[1] = std::numeric_limits<int32_t>::max();
  if (threshold_ > 0 && world > 1 && world <= (1 << kRankBits) && steps_ >= kMinSteps) {
    const int n = int(std::min<int64_t>(steps_, kWindow));
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += window_[i];
    const int32_t code = encode(1e6 * sum / n, rank);
    slots[0] = -code;
    slots[1] = code;
  }
}

std::string StragglerWatch::read(const int32_t* slots, int64_t step) {
  if (slots[0] == 0 || slots[1] == std::numeric_limits<int32_t>::max()) return "";  // no rank had a step to report
  const int32_t slow = -slots[0], fast = slots[1];
  const int slowest = slow & ((1 << kRankBits) - 1), fastest = fast & ((1 << kRankBits) - 1);
  const double ratio = std::exp2(double((slow >> kRankBits) - (fast >> kRankBits)) / 1024.0);
  char line[256];
  if (ratio >= threshold_ && slowest != fastest) {
    calm_ = 0;
    if (slowest != last_slowest_) {
      streak_ = 0;
      streak_from_ = step;
    }
    last_slowest_ = slowest;
    if (++streak_ == persistence_ && (!current_ || current_->rank != slowest)) {
      current_ = Straggler{slowest, ratio, streak_from_};
      std::snprintf(line, sizeof line,
                    "straggler: rank %d computes %.2fx the fastest rank's (rank %d) time per step, in each of the last "
                    "%d agreements (since step %lld)",
                    slowest, ratio, fastest, persistence_, static_cast<long long>(streak_from_));
      return line;
    }
    if (current_ && current_->rank == slowest) current_->ratio = ratio;
    return "";
  }
  streak_ = 0;
  last_slowest_ = -1;
  if (current_ && ++calm_ == persistence_) {
    std::snprintf(line, sizeof line, "straggler: rank %d is back within %.2fx of the fastest rank (step %lld)",
                  current_->rank, threshold_, static_cast<long long>(step));
    current_.reset();
    calm_ = 0;
    return line;
  }
  return "";
}

}  // namespace dpt
