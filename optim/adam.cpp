#include "optim/adam.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "models/kernels/cpu/parallel_for.h"
#include "optim/cuda/device_steps.h"
#include "optim/update_rules.h"

namespace dpt {

namespace {

constexpr int64_t kAdamGrain = 1 << 16;

// Branch-free body per variant so -O3 vectorizes it (sqrt needs -fno-math-errno); the
// formula is optim/update_rules.h's, the one the CUDA kernel runs.
template <bool kL2, bool kDecoupled>
void adam_loop(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, size_t n,
               AdamScalars s) {
  for (size_t i = 0; i < n; ++i) adam_update<kL2, kDecoupled>(p[i], g[i], m[i], v[i], s);
}

void check_range(const char* what, float value, float lo, bool lo_inclusive, float hi) {
  const bool ok = (lo_inclusive ? value >= lo : value > lo) && value < hi;
  if (!ok)
    throw std::invalid_argument(std::string("adam: invalid ") + what + " value " +
                                std::to_string(value));
}

}  // namespace

Adam::Adam(size_t numel, float beta1, float beta2, float eps, float weight_decay, bool decoupled)
    : Optimizer(numel),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled),
      exp_avg_(numel, 0.0f),
      exp_avg_sq_(numel, 0.0f) {
  check_range("beta1", beta1, 0.0f, true, 1.0f);
  check_range("beta2", beta2, 0.0f, true, 1.0f);
  check_range("eps", eps, 0.0f, true, INFINITY);
  check_range("weight_decay", weight_decay, 0.0f, true, INFINITY);
}

void Adam::step(std::span<float> params, std::span<const float> grads, float lr) {
  check_sizes(params, grads);
  ++step_count_;
  const AdamScalars s = scalars(lr);
  auto loop = decoupled_ ? (weight_decay_ != 0.0f ? adam_loop<false, true> : adam_loop<false, false>)
                         : (weight_decay_ != 0.0f ? adam_loop<true, false> : adam_loop<false, false>);
  // Every element on its own: chunks on parallel_for's threads give the bits one thread
  // gives (chunk lengths are a multiple of every vector width).
  parallel_for(static_cast<int64_t>(numel_), kAdamGrain, [&](int64_t i0, int64_t i1) {
    loop(params.data() + i0, grads.data() + i0, exp_avg_.data() + i0, exp_avg_sq_.data() + i0,
         static_cast<size_t>(i1 - i0), s);
  });
}

AdamScalars Adam::scalars(float lr) const {
  // Computed in double like torch's Python-side bias corrections, then used as float like
  // torch's scalar arguments.
  const double t = double(step_count_);
  const double bias_correction1 = 1.0 - std::pow(double(beta1_), t);
  const double bias_correction2 = 1.0 - std::pow(double(beta2_), t);
  AdamScalars s{};
  s.one_minus_beta1 = 1.0f - beta1_;
  s.beta2 = beta2_;
  s.one_minus_beta2 = 1.0f - beta2_;
  s.step_size = float(double(lr) / bias_correction1);
  s.bias_correction2_sqrt = float(std::sqrt(bias_correction2));
  s.eps = eps_;
  s.l2 = weight_decay_;
  s.decay_factor = float(1.0 - double(lr) * double(weight_decay_));
  return s;
}

void Adam::device_step(float* params, const float* grads, float lr, const std::vector<float*>& state) {
  ++step_count_;
  gpu::adam_step(params, grads, state[0], state[1], numel_, scalars(lr), !decoupled_ && weight_decay_ != 0.0f,
                 decoupled_ && weight_decay_ != 0.0f);
}

std::vector<std::pair<std::string, std::span<float>>> Adam::host_state() {
  return {{"exp_avg", std::span<float>(exp_avg_)}, {"exp_avg_sq", std::span<float>(exp_avg_sq_)}};
}

}  // namespace dpt
