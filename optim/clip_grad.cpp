#include "optim/clip_grad.h"

#include <algorithm>
#include <cmath>

namespace dpt {

double squared_norm(std::span<const float> x) {
  const float* p = x.data();
  const size_t n = x.size();
  double acc = 0.0;
  // A reduction only vectorizes if reassociation is allowed; the pragma (with
  // -fopenmp-simd, no OpenMP runtime) allows it for this loop alone.
#pragma omp simd reduction(+ : acc)
  for (size_t i = 0; i < n; ++i) acc += double(p[i]) * double(p[i]);
  return acc;
}

float clip_coefficient(float max_norm, float total_norm) {
  const float coef = max_norm / (total_norm + 1e-6f);
  return std::min(coef, 1.0f);
}

float clip_grad_norm(std::span<float> grads, float max_norm, double global_squared_norm) {
  const float total_norm = float(std::sqrt(global_squared_norm));
  const float coef = clip_coefficient(max_norm, total_norm);
  // torch multiplies even when coef == 1; skipping that is exact and saves a pass.
  if (coef != 1.0f) {
    float* g = grads.data();
    const size_t n = grads.size();
    for (size_t i = 0; i < n; ++i) g[i] *= coef;
  }
  return total_norm;
}

float clip_grad_norm(std::span<float> grads, float max_norm) {
  return clip_grad_norm(grads, max_norm, squared_norm(grads));
}

}  // namespace dpt
