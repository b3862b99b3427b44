#include "models/nn/layers/activations.h"

#include "models/kernels/cuda/gpu_ops.h"

#include <cmath>

#include "models/kernels/cpu/fast_math.h"
#include "models/kernels/cpu/parallel_for.h"

namespace dpt {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
// Elements per chunk when GELU runs on parallel_for's threads: a multiple of every vector
// width, so each element is computed by the same code as on one thread (same bits).
constexpr int64_t kGeluGrain = 1 << 14;
}  // namespace

// DPT_VECTOR_CLONES (models/kernels/cpu/fast_math.h): an AVX-512, an AVX2 and a baseline copy.
DPT_VECTOR_CLONES
void gelu_forward(const float* x, float* y, float* tanh_out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = fast_tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
    tanh_out[i] = t;
  }
}

DPT_VECTOR_CLONES
void gelu_backward(const float* x, const float* tanh_in, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = tanh_in[i];
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

const Tensor& Relu::forward(const Tensor& in, const ForwardContext&) {
  y_.resize_like(in);
  const float* x = in.data();
  float* y = y_.data();
  const size_t n = in.numel();
  if (in.on_cuda()) return gpu::relu_forward(x, y, n), y_;
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return y_;
}

const Tensor& Relu::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  // y > 0 exactly where x > 0, so the output serves as the mask.
  dx_.resize_like(dout);
  const float* y = y_.data();
  const float* dy = dout.data();
  float* dx = dx_.data();
  const size_t n = dout.numel();
  if (dout.on_cuda()) return gpu::relu_backward(y, dy, dx, n), dx_;
  // Both loads unconditional so the select vectorises.
  for (size_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
  return dx_;
}

const Tensor& Gelu::forward(const Tensor& in, const ForwardContext&) {
  x_ = &in;
  y_.resize_like(in);
  tanh_.resize_like(in);
  if (in.on_cuda()) gpu::gelu_forward(in.data(), y_.data(), tanh_.data(), in.numel());
  else
    parallel_for(static_cast<int64_t>(in.numel()), kGeluGrain, [&](int64_t i0, int64_t i1) {
      gelu_forward(in.data() + i0, y_.data() + i0, tanh_.data() + i0, static_cast<size_t>(i1 - i0));
    });
  return y_;
}

const Tensor& Gelu::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  dx_.resize_like(dout);
  if (dout.on_cuda()) gpu::gelu_backward(x_->data(), tanh_.data(), dout.data(), dx_.data(), dout.numel());
  else
    parallel_for(static_cast<int64_t>(dout.numel()), kGeluGrain, [&](int64_t i0, int64_t i1) {
      gelu_backward(x_->data() + i0, tanh_.data() + i0, dout.data() + i0, dx_.data() + i0,
                    static_cast<size_t>(i1 - i0));
    });
  return dx_;
}

}  // namespace dpt
