// Helpers for the models tests: random tensors and a central finite-difference check.
//
// Gradient check: with a fixed random R, the probe loss is L(out) = sum(out * R), so
// dL/dout = R exactly. Backward from R gives analytic gradients; central differences
// (L(p + eps) - L(p - eps)) / (2 eps) per element give numeric ones. They agree when
// the relative error ||a - n|| / max(||a||, ||n||) is small.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "models/nn/tensor.h"

namespace dpt::testing {

inline void fill_random(std::span<float> v, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : v) x = dist(gen);
}

inline double probe_loss(const Tensor& out, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < out.numel(); ++i) s += static_cast<double>(out[i]) * r[i];
  return s;
}

struct GradCompare {
  double rel_error = 0;
  double max_abs_diff = 0;
  double norm = 0;
  size_t checked = 0;
  size_t kinks = 0;  // elements skipped because L is not differentiable there
};

// Central differences of `loss` w.r.t. each selected element of `values` (in place),
// compared with `analytic`. `indices` empty means every element.
// With skip_kinks, an element where the one-sided slopes (L(p+e)-L(p))/e and
// (L(p)-L(p-e))/e disagree by far more than smooth curvature allows is a ReLU or
// max-pool kink inside [p-e, p+e]; it is counted in `kinks` and not compared.
inline GradCompare check_gradient(std::span<float> values, std::span<const float> analytic,
                                  const std::function<double()>& loss, float eps,
                                  std::vector<size_t> indices = {}, bool skip_kinks = false) {
  if (indices.empty())
    for (size_t i = 0; i < values.size(); ++i) indices.push_back(i);
  double diff2 = 0, a2 = 0, n2 = 0, max_abs = 0;
  size_t kinks_ = 0, checked_ = 0;
  for (size_t i : indices) {
    const float orig = values[i];
    values[i] = orig + eps;
    const double lp = loss();
    values[i] = orig - eps;
    const double lm = loss();
    values[i] = orig;
    const double num = (lp - lm) / (2.0 * eps);
    if (skip_kinks) {
      const double l0 = loss();
      const double right = (lp - l0) / eps, left = (l0 - lm) / eps;
      const double noise = 1e-6 * std::abs(l0) / eps;
      if (std::abs(right - left) > 0.2 * std::max(std::abs(left), std::abs(right)) + 20 * noise) {
        ++kinks_;
        continue;
      }
    }
    ++checked_;
    const double a = analytic[i];
    diff2 += (a - num) * (a - num);
    a2 += a * a;
    n2 += num * num;
    max_abs = std::max(max_abs, std::abs(a - num));
  }
  GradCompare c;
  c.norm = std::sqrt(std::max(a2, n2));
  c.rel_error = c.norm > 0 ? std::sqrt(diff2) / c.norm : 0.0;
  c.max_abs_diff = max_abs;
  c.kinks = kinks_;
  c.checked = checked_;
  return c;
}

}  // namespace dpt::testing
