#include "models/nn/layers/avg_pool.h"

#include <stdexcept>

#include "models/kernels/cuda/gpu_ops.h"

namespace dpt {
namespace {
int64_t cell_begin(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t cell_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }
}  // namespace

AdaptiveAvgPool2d::AdaptiveAvgPool2d(const std::string& name, int64_t out_h, int64_t out_w)
    : Layer(name), oh_(out_h), ow_(out_w) {
  if (out_h < 1 || out_w < 1) throw std::invalid_argument(name + ": output size must be positive");
}

const Tensor& AdaptiveAvgPool2d::forward(const Tensor& in, const ForwardContext&) {
  if (in.rank() != 4 || in.dim(2) < 1 || in.dim(3) < 1)
    throw std::invalid_argument(name() + ": expected NCHW, got " + shape_to_string(in.shape()));
  in_shape_ = in.shape();
  const int64_t planes = in.dim(0) * in.dim(1), h = in.dim(2), w = in.dim(3);
  y_.set_device(in.device());
  y_.resize({in.dim(0), in.dim(1), oh_, ow_});
  if (in.on_cuda()) {
    gpu::adaptive_avg_pool_forward(in.data(), y_.data(), int(planes), int(h), int(w), int(oh_), int(ow_));
    return y_;
  }
  const float* x = in.data();
  float* y = y_.data();
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* src = x + pl * h * w;
    for (int64_t i = 0; i < oh_; ++i) {
      const int64_t y0 = cell_begin(i, h, oh_), y1 = cell_end(i, h, oh_);
      for (int64_t j = 0; j < ow_; ++j) {
        const int64_t x0 = cell_begin(j, w, ow_), x1 = cell_end(j, w, ow_);
        float sum = 0.0f;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) sum += src[iy * w + ix];
        y[(pl * oh_ + i) * ow_ + j] = sum / static_cast<float>((y1 - y0) * (x1 - x0));
      }
    }
  }
  return y_;
}

const Tensor& AdaptiveAvgPool2d::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  dx_.set_device(dout.device());
  dx_.resize(in_shape_);
  const int64_t planes = in_shape_[0] * in_shape_[1], h = in_shape_[2], w = in_shape_[3];
  if (dout.on_cuda()) {
    gpu::adaptive_avg_pool_backward(dout.data(), dx_.data(), int(planes), int(h), int(w), int(oh_), int(ow_));
    return dx_;
  }
  dx_.zero();
  const float* dy = dout.data();
  float* dx = dx_.data();
  for (int64_t pl = 0; pl < planes; ++pl) {
    float* dst = dx + pl * h * w;
    for (int64_t i = 0; i < oh_; ++i) {
      const int64_t y0 = cell_begin(i, h, oh_), y1 = cell_end(i, h, oh_);
      for (int64_t j = 0; j < ow_; ++j) {
        const int64_t x0 = cell_begin(j, w, ow_), x1 = cell_end(j, w, ow_);
        const float g = dy[(pl * oh_ + i) * ow_ + j] / static_cast<float>((y1 - y0) * (x1 - x0));
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) dst[iy * w + ix] += g;
      }
    }
  }
  return dx_;
}

}  // namespace dpt
