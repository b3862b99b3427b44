#pragma once
// Reference optimizers for the tests: torch's update rules written out again, per element
// and in double precision, independently of optim/ (no shared code, no float rounding).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace dpt::testing {

struct RefSgd {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  std::vector<double> buf;
  bool first = true;
  void step(std::vector<double>& p, const std::vector<double>& g) {
    if (buf.empty()) buf.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i];
      if (weight_decay != 0) d += weight_decay * p[i];
      if (momentum != 0) {
        buf[i] = first ? d : momentum * buf[i] + (1 - dampening) * d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
    first = false;
  }
};

struct RefAdam {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
  std::vector<double> m, v;
  int t = 0;
  void step(std::vector<double>& p, const std::vector<double>& g_in) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      double g = g_in[i];
      if (decoupled)
        p[i] *= 1 - lr * weight_decay;
      else
        g += weight_decay * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(beta1, t));
      const double v_hat = v[i] / (1 - std::pow(beta2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

inline std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * (float(rng() >> 40) / float(1 << 24) * 2.0f - 1.0f);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace dpt::testing
