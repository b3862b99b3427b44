#include "parallel/precision/loss_scaler.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace dpt {

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  if (!(config.init_scale > 0) || !std::isfinite(config.init_scale))
    throw std::invalid_argument("--loss-scale-init must be a finite number > 0, got " + std::to_string(config.init_scale));
  if (config.growth_interval < 1)
    throw std::invalid_argument("--loss-scale-window must be at least 1, got " + std::to_string(config.growth_interval));
  state_.scale = config.init_scale;
}

bool unscale_and_find_nonfinite(std::span<float> grads, float inv_scale) {
  int32_t bad = 0;
  for (float& g : grads) {
    g *= inv_scale;
    bad |= std::isfinite(g) ? 0 : 1;
  }
  return bad != 0;
}

bool LossScaler::agree_on_skip(bool found_inf_here, Communicator& comm) const {
  int32_t bad = found_inf_here ? 1 : 0;
  comm.allreduce(make_buffer(&bad, 1), ReduceOp::max);
  return bad != 0;
}

bool LossScaler::unscale_and_check(std::span<float> grads, Communicator& comm) const {
  return agree_on_skip(unscale_and_find_nonfinite(grads, inverse_scale()), comm);
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    state_.scale *= config_.backoff_factor;
    state_.growth_tracker = 0;
    ++state_.skipped_steps;
    return;
  }
  if (++state_.growth_tracker == config_.growth_interval) {
    state_.scale *= config_.growth_factor;
    state_.growth_tracker = 0;
  }
}

}  // namespace dpt
