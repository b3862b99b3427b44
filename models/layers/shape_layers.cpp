#include "models/layers/shape_layers.h"

#include "models/cuda/gpu_ops.h"

#include <algorithm>
#include <stdexcept>

namespace dpt {

const Tensor& MaxPool2d::forward(const Tensor& in, const ForwardContext&) {
  if (in.rank() != 4)
    throw std::invalid_argument(name() + ": expected NCHW, got " + shape_to_string(in.shape()));
  x_ = &in;
  const int64_t planes = in.dim(0) * in.dim(1), h = in.dim(2), w = in.dim(3);
  const int64_t oh = (h - k_) / stride_ + 1, ow = (w - k_) / stride_ + 1;
  y_.resize({in.dim(0), in.dim(1), oh, ow});
  argmax_.resize(static_cast<size_t>(planes * oh * ow));
  const float* x = in.data();
  float* y = y_.data();
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* src = x + pl * h * w;
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t best = (oy * stride_) * w + ox * stride_;
        for (int64_t ky = 0; ky < k_; ++ky)
          for (int64_t kx = 0; kx < k_; ++kx) {
            int64_t idx = (oy * stride_ + ky) * w + ox * stride_ + kx;
            if (src[idx] > src[best]) best = idx;
          }
        const int64_t o = (pl * oh + oy) * ow + ox;
        y[o] = src[best];
        argmax_[o] = static_cast<int32_t>(best);
      }
  }
  return y_;
}

const Tensor& MaxPool2d::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  dx_.resize_like(*x_);
  dx_.zero();
  const int64_t plane_in = x_->dim(2) * x_->dim(3);
  const int64_t plane_out = dout.dim(2) * dout.dim(3);
  const int64_t planes = dout.dim(0) * dout.dim(1);
  const float* dy = dout.data();
  float* dx = dx_.data();
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t i = 0; i < plane_out; ++i) {
      const int64_t o = pl * plane_out + i;
      dx[pl * plane_in + argmax_[o]] += dy[o];
    }
  return dx_;
}

const Tensor& Flatten::forward(const Tensor& in, const ForwardContext&) {
  in_shape_ = in.shape();
  const int64_t n = in.rank() ? in.dim(0) : 1;
  y_.set_device(in.device());
  y_.resize({n, static_cast<int64_t>(in.numel()) / std::max<int64_t>(n, 1)});
  if (in.on_cuda()) gpu::copy(y_.data(), in.data(), in.numel() * sizeof(float));
  else std::copy(in.data(), in.data() + in.numel(), y_.data());
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  dx_.set_device(dout.device());
  dx_.resize(in_shape_);
  if (dout.on_cuda()) gpu::copy(dx_.data(), dout.data(), dout.numel() * sizeof(float));
  else std::copy(dout.data(), dout.data() + dout.numel(), dx_.data());
  return dx_;
}

}  // namespace dpt
