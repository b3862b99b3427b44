#include "models/nn/layers/dropout.h"

#include <stdexcept>

#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cpu/fast_math.h"
#include "models/nn/init.h"

namespace dpt {
namespace {
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

uint32_t dropout_threshold(float p) { return static_cast<uint32_t>(static_cast<double>(p) * (1u << 24)); }

uint64_t dropout_draw_key(uint64_t layer_key, uint64_t step, uint64_t stream) {
  return mix64(layer_key ^ mix64(step * kGolden + mix64(stream + 1)));
}

// DPT_VECTOR_CLONES: AVX-512 has 64-bit multiplies in vector registers.
DPT_VECTOR_CLONES
void dropout_apply(const float* x, float* y, size_t n, float p, uint64_t draw_key, uint64_t offset) {
  const uint32_t threshold = dropout_threshold(p);
  const float scale = 1.0f / (1.0f - p);
  const uint64_t base = draw_key + offset * kGolden;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t draw = static_cast<uint32_t>(mix64(base + i * kGolden) >> 40);
    y[i] = x[i] * (draw < threshold ? 0.0f : scale);  // x * 0: a NaN stays NaN, as in PyTorch
  }
}

void dropout_apply_on(bool cuda, const float* x, float* y, size_t n, float p, uint64_t draw_key, uint64_t offset) {
  if (cuda) return gpu::dropout_apply(x, y, n, dropout_threshold(p), 1.0f / (1.0f - p), draw_key, offset);
  dropout_apply(x, y, n, p, draw_key, offset);
}

Dropout::Dropout(const std::string& name, float p) : Layer(name), p_(p) {
  if (!(p >= 0.0f && p < 1.0f))
    throw std::invalid_argument(name + ": dropout p " + std::to_string(p) + " must be in [0, 1)");
  set_seed(0);
}

void Dropout::init_params(ParamStore&, uint64_t seed) { set_seed(seed); }

void Dropout::set_seed(uint64_t seed) { key_ = param_seed(seed, name()); }

bool Dropout::begin(const ForwardContext& ctx) {
  active_ = ctx.training && p_ > 0.0f;
  draw_ = active_ ? dropout_draw_key(key_, ctx.rng_step, ctx.rng_stream) : 0;
  return active_;
}

const Tensor& Dropout::forward(const Tensor& in, const ForwardContext& ctx) {
  if (!begin(ctx)) return in;
  y_.resize_like(in);
  dropout_apply_on(in.on_cuda(), in.data(), y_.data(), in.numel(), p_, draw_);
  return y_;
}

const Tensor& Dropout::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!active_) return dout;
  if (!need_input_grad) return dx_;
  dx_.resize_like(dout);
  dropout_apply_on(dout.on_cuda(), dout.data(), dx_.data(), dout.numel(), p_, draw_);
  return dx_;
}

}  // namespace dpt
