#include "optim/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <stdexcept>

namespace dpt {

LrSchedule::~LrSchedule() = default;

StepLr::StepLr(float lr, int64_t step_size, float gamma)
    : lr_(lr), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) throw std::invalid_argument("step lr schedule: step_size must be positive");
}

float StepLr::lr(int64_t step) const {
  const int64_t k = step < 0 ? 0 : step / step_size_;
  return float(double(lr_) * std::pow(double(gamma_), double(k)));
}

CosineWarmupLr::CosineWarmupLr(float lr, int64_t warmup_steps, int64_t total_steps, float min_lr)
    : lr_(lr), warmup_steps_(warmup_steps), total_steps_(total_steps), min_lr_(min_lr) {
  if (warmup_steps < 0)
    throw std::invalid_argument("cosine lr schedule: warmup_steps must be >= 0");
  if (total_steps <= warmup_steps) {
    throw std::invalid_argument("cosine lr schedule: total_steps (" + std::to_string(total_steps) +
                                ") must exceed warmup_steps (" + std::to_string(warmup_steps) +
                                ")");
  }
}

float CosineWarmupLr::lr(int64_t step) const {
  if (step < warmup_steps_) {
    // (step + 1) so that the very first step already moves, and step warmup-1 is at lr.
    return float(double(lr_) * double(step + 1) / double(warmup_steps_));
  }
  if (step >= total_steps_) return min_lr_;
  const double r = double(step - warmup_steps_) / double(total_steps_ - warmup_steps_);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * r));
  return float(double(min_lr_) + coeff * (double(lr_) - double(min_lr_)));
}

std::unique_ptr<LrSchedule> make_lr_schedule(std::string_view kind, const LrScheduleConfig& c) {
  if (kind == "constant") return std::make_unique<ConstantLr>(c.lr);
  if (kind == "step") return std::make_unique<StepLr>(c.lr, c.step_size, c.gamma);
  if (kind == "cosine")
    return std::make_unique<CosineWarmupLr>(c.lr, c.warmup_steps, c.total_steps, c.min_lr);
  throw std::invalid_argument("unknown lr schedule '" + std::string(kind) +
                              "' (valid: constant, step, cosine)");
}

}  // namespace dpt
