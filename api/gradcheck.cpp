#include "dpt/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>

namespace dpt::nn {
namespace {
// sum(w * y) in float64.
double weighted(const Tensor& y, const Tensor& w) {
  double s = 0;
  for (size_t i = 0; i < y.numel(); ++i) s += double(w[i]) * double(y[i]);
  return s;
}
}  // namespace

std::string GradCheckResult::report() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "gradcheck: %s, %lld elements, largest error %.3g at %s", passed ? "passed" : "FAILED",
                (long long)elements, max_error, worst.empty() ? "-" : worst.c_str());
  return buf;
}

GradCheckResult gradcheck(CustomLayer& layer, const std::vector<int64_t>& input_shape, const GradCheckOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const std::vector<ParameterSpec> specs = layer.parameters();
  std::vector<std::vector<float>> params;
  for (const ParameterSpec& p : specs) {
    size_t n = 1;
    for (int64_t d : p.shape) n *= size_t(d);
    std::vector<float> v(n);
    for (float& e : v) e = uni(rng);
    params.push_back(std::move(v));
  }
  Tensor x(input_shape);
  for (float& e : x.values()) e = uni(rng);
  auto views = [&] {
    std::vector<std::span<const float>> out;
    for (auto& p : params) out.emplace_back(p);
    return out;
  };
  const Tensor y = layer.forward(x, views());
  Tensor w(y.shape());
  for (float& e : w.values()) e = uni(rng);
  // The analytic gradients: backward from dy = w.
  std::vector<std::vector<float>> grads;
  for (auto& p : params) grads.emplace_back(p.size(), 0.0f);
  std::vector<std::span<float>> gviews;
  for (auto& g : grads) gviews.emplace_back(g);
  const Tensor dx = layer.backward(x, y, w, views(), gviews);
  if (dx.shape() != x.shape())
    throw std::logic_error("dpt::nn::gradcheck: backward returned a gradient of shape " + dx.shape_text() +
                           " for an input of shape " + x.shape_text());

  GradCheckResult r;
  // One tensor's elements: v is perturbed in place, analytic holds dL/dv.
  auto check = [&](std::span<float> v, std::span<const float> analytic, const std::string& name) {
    std::vector<double> numeric(v.size());
    double scale = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const float keep = v[i];
      const double h = o.step * std::max(1.0, std::fabs(double(keep)));
      v[i] = float(double(keep) + h);
      const double up = weighted(layer.forward(x, views()), w);
      v[i] = float(double(keep) - h);
      const double down = weighted(layer.forward(x, views()), w);
      v[i] = keep;
      // The step actually taken, after float32 rounding of keep +- h.
      const double taken = double(float(double(keep) + h)) - double(float(double(keep) - h));
      numeric[i] = (up - down) / taken;
      scale = std::max(scale, std::fabs(numeric[i]));
    }
    for (size_t i = 0; i < v.size(); ++i) {
      const double err = std::fabs(double(analytic[i]) - numeric[i]);
      ++r.elements;
      if (err > r.max_error) {
        r.max_error = err;
        r.worst = name + "[" + std::to_string(i) + "]";
      }
      if (err > o.atol * (1 + scale) + o.rtol * std::fabs(numeric[i])) r.passed = false;
    }
  };
  check(x.values(), dx.values(), "input");
  for (size_t p = 0; p < params.size(); ++p) check(params[p], grads[p], specs[p].name);
  return r;
}

}  // namespace dpt::nn
