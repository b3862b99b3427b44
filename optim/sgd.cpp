#include "optim/sgd.h"

#include <stdexcept>
#include <string>

namespace dpt {

namespace {

// Every variant is its own loop without branches inside, so -O3 vectorizes each one; the
// flags are template parameters and resolved once per step.
template <bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_loop(float* __restrict p, const float* __restrict g, float* __restrict buf, size_t n,
              float lr, float wd, float mu, float one_minus_dampening) {
  for (size_t i = 0; i < n; ++i) {
    float d = g[i];
    if constexpr (kDecay) d = d + wd * p[i];
    if constexpr (kMomentum) {
      float b;
      if constexpr (kFirst)
        b = d;  // torch: buf = clone(d_p), no dampening
      else
        b = buf[i] * mu + one_minus_dampening * d;
      buf[i] = b;
      if constexpr (kNesterov)
        d = d + mu * b;
      else
        d = b;
    }
    p[i] = p[i] - lr * d;
  }
}

using SgdLoop = void (*)(float*, const float*, float*, size_t, float, float, float, float);

template <bool kDecay>
SgdLoop pick_loop(bool momentum, bool first, bool nesterov) {
  if (!momentum) return sgd_loop<kDecay, false, false, false>;
  if (first)
    return nesterov ? sgd_loop<kDecay, true, true, true> : sgd_loop<kDecay, true, true, false>;
  return nesterov ? sgd_loop<kDecay, true, false, true> : sgd_loop<kDecay, true, false, false>;
}

}  // namespace

Sgd::Sgd(size_t numel, float momentum, float dampening, bool nesterov, float weight_decay)
    : Optimizer(numel),
      momentum_(momentum),
      dampening_(dampening),
      nesterov_(nesterov),
      weight_decay_(weight_decay) {
  if (!(momentum >= 0.0f))
    throw std::invalid_argument("sgd: invalid momentum value " + std::to_string(momentum));
  if (!(weight_decay >= 0.0f)) {
    throw std::invalid_argument("sgd: invalid weight_decay value " + std::to_string(weight_decay));
  }
  if (nesterov && (momentum <= 0.0f || dampening != 0.0f)) {
    throw std::invalid_argument("sgd: nesterov momentum requires a momentum and zero dampening");
  }
  if (momentum != 0.0f) momentum_buffer_.assign(numel, 0.0f);
}

void Sgd::step(std::span<float> params, std::span<const float> grads, float lr) {
  check_sizes(params, grads);
  const bool momentum = momentum_ != 0.0f;
  const bool first = step_count_ == 0;
  const SgdLoop loop = weight_decay_ != 0.0f ? pick_loop<true>(momentum, first, nesterov_)
                                             : pick_loop<false>(momentum, first, nesterov_);
  loop(params.data(), grads.data(), momentum ? momentum_buffer_.data() : nullptr, numel_, lr,
       weight_decay_, momentum_, 1.0f - dampening_);
  ++step_count_;
}

std::vector<std::pair<std::string, std::span<float>>> Sgd::state_buffers() {
  if (momentum_ == 0.0f) return {};
  return {{"momentum_buffer", std::span<float>(momentum_buffer_)}};
}

}  // namespace dpt
