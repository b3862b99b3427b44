#include "models/layers/dropout.h"

#include <stdexcept>

namespace dpt {
namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Dropout::Dropout(const std::string& name, float p, uint64_t seed) : Layer(name), p_(p) {
  if (p < 0.0f || p >= 1.0f) throw std::invalid_argument(name + ": dropout p must be in [0, 1)");
  for (auto& s : rng_) s = splitmix64(seed);
}

uint64_t Dropout::next() {
  const uint64_t result = rotl(rng_[1] * 5, 7) * 9;
  const uint64_t t = rng_[1] << 17;
  rng_[2] ^= rng_[0];
  rng_[3] ^= rng_[1];
  rng_[1] ^= rng_[2];
  rng_[0] ^= rng_[3];
  rng_[2] ^= t;
  rng_[3] = rotl(rng_[3], 45);
  return result;
}

const Tensor& Dropout::forward(const Tensor& in, const ForwardContext& ctx) {
  active_ = ctx.training && p_ > 0.0f;
  y_.resize_like(in);
  const size_t n = in.numel();
  if (!active_) {
    std::copy(in.data(), in.data() + n, y_.data());
    return y_;
  }
  mask_.resize_like(in);
  float* m = mask_.data();
  const float scale = 1.0f / (1.0f - p_);
  // Compare the top 24 bits with p * 2^24: exact in float, no division per element.
  const uint64_t threshold = static_cast<uint64_t>(static_cast<double>(p_) * (1u << 24));
  for (size_t i = 0; i < n; ++i) m[i] = (next() >> 40) < threshold ? 0.0f : scale;
  const float* x = in.data();
  float* y = y_.data();
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * m[i];
  return y_;
}

const Tensor& Dropout::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  dx_.resize_like(dout);
  const size_t n = dout.numel();
  const float* dy = dout.data();
  float* dx = dx_.data();
  if (!active_) {
    std::copy(dy, dy + n, dx);
    return dx_;
  }
  const float* m = mask_.data();
  for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * m[i];
  return dx_;
}

}  // namespace dpt
