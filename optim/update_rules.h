#pragma once
// The optimizers' per-element formulas, written once for the CPU loops (sgd.cpp, adam.cpp)
// and the CUDA kernels (cuda/device_steps.cu), so an optimizer stepping on the GPU runs the
// very expressions the CPU runs. Both sides build them without contracting a multiply and
// an add into an FMA (sgd.cpp and adam.cpp with -ffp-contract=off, the kernels with
// nvcc --fmad=false), and sqrt and division are IEEE-rounded on both (nvcc's defaults), so
// a step gives the same bits on either: the GPU tests compare bit for bit.
//
// The formulas are torch.optim's (sgd.h and adam.h spell them out).
#include <cmath>

#if defined(__CUDACC__)
#define DPT_HOST_DEVICE __host__ __device__
#else
#define DPT_HOST_DEVICE
#endif

namespace dpt {

// Adam's scalars that are the same for every element of a step (adam_scalars in adam.h).
struct AdamScalars {
  float one_minus_beta1, beta2, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
  float l2, decay_factor;  // L2 coefficient (Adam) and 1 - lr * wd (AdamW)
};

// One element of Adam (kL2: weight decay added to the gradient) or AdamW (kDecoupled).
template <bool kL2, bool kDecoupled>
DPT_HOST_DEVICE inline void adam_update(float& p, float g, float& m, float& v, const AdamScalars& s) {
  float pi = p;
  if constexpr (kDecoupled) pi = pi * s.decay_factor;
  if constexpr (kL2) g = g + s.l2 * pi;
  const float mi = m + s.one_minus_beta1 * (g - m);
  const float vi = v * s.beta2 + s.one_minus_beta2 * g * g;
  m = mi;
  v = vi;
#if defined(__CUDA_ARCH__)
  const float root = sqrtf(vi);
#else
  const float root = std::sqrt(vi);
#endif
  const float denom = root / s.bias_correction2_sqrt + s.eps;
  p = pi - s.step_size * (mi / denom);
}

struct SgdScalars {
  float lr, weight_decay, momentum, one_minus_dampening;
};

// One element of SGD; buf is the element's momentum slot (unused without kMomentum).
// kFirst: the first step, where torch starts the buffer at d without dampening.
template <bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
DPT_HOST_DEVICE inline void sgd_update(float& p, float g, float& buf, const SgdScalars& s) {
  float d = g;
  if constexpr (kDecay) d = d + s.weight_decay * p;
  if constexpr (kMomentum) {
    float b;
    if constexpr (kFirst)
      b = d;
    else
      b = buf * s.momentum + s.one_minus_dampening * d;
    buf = b;
    if constexpr (kNesterov)
      d = d + s.momentum * b;
    else
      d = b;
  }
  p = p - s.lr * d;
}

}  // namespace dpt
