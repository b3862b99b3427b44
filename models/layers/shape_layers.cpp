#include "models/layers/shape_layers.h"

#include "device/runtime.h"
#include "models/parallel_for.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dpt {

MaxPool2d::MaxPool2d(const std::string& name, int64_t kernel, int64_t stride, int64_t padding)
    : Layer(name), k_(kernel), stride_(stride > 0 ? stride : kernel), pad_(padding) {
  if (kernel < 1 || padding < 0 || 2 * padding > kernel)
    throw std::invalid_argument(name + ": MaxPool2d needs kernel >= 1 and 0 <= padding <= kernel / 2");
}

const Tensor& MaxPool2d::forward(const Tensor& in, const ForwardContext&) {
  if (in.rank() != 4)
    throw std::invalid_argument(name() + ": expected NCHW, got " + shape_to_string(in.shape()));
  if (in.on_cuda()) throw std::invalid_argument(name() + ": MaxPool2d has no CUDA kernels");
  x_ = &in;
  const int64_t planes = in.dim(0) * in.dim(1), h = in.dim(2), w = in.dim(3);
  if (h + 2 * pad_ < k_ || w + 2 * pad_ < k_)
    throw std::invalid_argument(name() + ": input " + shape_to_string(in.shape()) + " is smaller than the " +
                                std::to_string(k_) + "x" + std::to_string(k_) + " window");
  const int64_t oh = (h + 2 * pad_ - k_) / stride_ + 1, ow = (w + 2 * pad_ - k_) / stride_ + 1;
  y_.resize({in.dim(0), in.dim(1), oh, ow});
  argmax_.resize(static_cast<size_t>(planes * oh * ow));
  const float* x = in.data();
  float* y = y_.data();
  parallel_for(planes, parallel_grain(oh * ow * k_ * k_), [&](int64_t first, int64_t last) {
    for (int64_t pl = first; pl < last; ++pl) {
      const float* src = x + pl * h * w;
      for (int64_t oy = 0; oy < oh; ++oy) {
        const int64_t y0 = std::max<int64_t>(oy * stride_ - pad_, 0), y1 = std::min(oy * stride_ - pad_ + k_, h);
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t x0 = std::max<int64_t>(ox * stride_ - pad_, 0), x1 = std::min(ox * stride_ - pad_ + k_, w);
          int64_t best = y0 * w + x0;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) {
              const int64_t idx = iy * w + ix;
              if (src[idx] > src[best] || std::isnan(src[idx])) best = idx;
            }
          const int64_t o = (pl * oh + oy) * ow + ox;
          y[o] = src[best];
          argmax_[o] = static_cast<int32_t>(best);
        }
      }
    }
  });
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
  if (in.on_cuda()) device::copy_on_kernel_stream(y_.data(), in.data(), in.numel() * sizeof(float));
  else std::copy(in.data(), in.data() + in.numel(), y_.data());
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  dx_.set_device(dout.device());
  dx_.resize(in_shape_);
  if (dout.on_cuda()) device::copy_on_kernel_stream(dx_.data(), dout.data(), dout.numel() * sizeof(float));
  else std::copy(dout.data(), dout.data() + dout.numel(), dx_.data());
  return dx_;
}

}  // namespace dpt
