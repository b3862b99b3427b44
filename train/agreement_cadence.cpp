#include "train/agreement_cadence.h"

#include <algorithm>
#include <cmath>

namespace dpt {

int32_t AgreementCadence::propose(int64_t step, Clock::time_point now) const {
  if (interval_s_ <= 0 || next_ < 0 || step <= last_step_) return 1;
  // The pace includes whatever ran between the agreements (a blocking outer exchange, an
  // evaluation): a slower pace only brings the next agreement closer.
  const double took = std::chrono::duration<double>(now - last_time_).count();
  const double per_step = took / double(step - last_step_);
  const double fit = per_step > 0 ? std::floor(interval_s_ / per_step) : double(INT32_MAX);
  return int32_t(std::clamp(fit, 1.0, double(INT32_MAX)));
}

void AgreementCadence::agreed(int64_t step, int32_t steps, Clock::time_point now) {
  ++count_;
  last_step_ = step;
  last_time_ = now;
  next_ = step + std::max<int32_t>(steps, 1);
}

}  // namespace dpt
