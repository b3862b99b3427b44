#include "models/layers/layer_norm.h"

#include "models/cuda/gpu_ops.h"

#include <cmath>
#include <stdexcept>

#include "models/init.h"

namespace dpt {

LayerNorm::LayerNorm(ParamStore& store, const std::string& name, int64_t dim, float eps)
    : Layer(name), store_(store), d_(dim), eps_(eps) {
  w_ = store.add(join_name(name, "weight"), {dim});
  b_ = store.add(join_name(name, "bias"), {dim});
}

void LayerNorm::init_params(ParamStore& store, uint64_t) {
  init_constant(store.param_span(w_), 1.0f);
  init_constant(store.param_span(b_), 0.0f);
}

const Tensor& LayerNorm::forward(const Tensor& in, const ForwardContext&) {
  if (in.last_dim() != d_)
    throw std::invalid_argument(name() + ": input " + shape_to_string(in.shape()) +
                                " does not end in " + std::to_string(d_));
  x_ = &in;
  const size_t rows = in.numel() / d_;
  y_.resize_like(in);
  if (in.on_cuda()) {
    stats_.set_device(TensorDevice::kCuda);
    stats_.resize({2, static_cast<int64_t>(rows)});  // mean, then rstd
    gpu::layer_norm_forward(in.data(), store_.device_param(w_), store_.device_param(b_), y_.data(),
                            stats_.data(), stats_.data() + rows, static_cast<int>(rows), static_cast<int>(d_), eps_);
    return y_;
  }
  mean_.resize(rows);
  rstd_.resize(rows);
  const float* w = store_.param(w_);
  const float* b = store_.param(b_);
  for (size_t r = 0; r < rows; ++r) {
    const float* x = in.data() + r * d_;
    float* y = y_.data() + r * d_;
    float sum = 0.0f;
    for (int64_t i = 0; i < d_; ++i) sum += x[i];
    const float mean = sum / d_;
    float var = 0.0f;
    for (int64_t i = 0; i < d_; ++i) var += (x[i] - mean) * (x[i] - mean);
    const float rstd = 1.0f / std::sqrt(var / d_ + eps_);
    for (int64_t i = 0; i < d_; ++i) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
    mean_[r] = mean;
    rstd_[r] = rstd;
  }
  return y_;
}

const Tensor& LayerNorm::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const size_t rows = dout.numel() / d_;
  if (dout.on_cuda()) {
    if (need_input_grad) dx_.resize_like(dout);
    gpu::layer_norm_backward(x_->data(), store_.device_param(w_), stats_.data(), stats_.data() + rows, dout.data(),
                             need_input_grad ? dx_.data() : nullptr, store_.device_grad(w_), store_.device_grad(b_),
                             static_cast<int>(rows), static_cast<int>(d_));
    sink.ready(b_);
    sink.ready(w_);
    return dx_;
  }
  const float* w = store_.param(w_);
  float* dw = store_.grad(w_);
  float* db = store_.grad(b_);
  if (need_input_grad) dx_.resize_like(dout);
  for (size_t r = 0; r < rows; ++r) {
    const float* x = x_->data() + r * d_;
    const float* dy = dout.data() + r * d_;
    const float mean = mean_[r], rstd = rstd_[r];
    float mean_g = 0.0f, mean_gx = 0.0f;
    for (int64_t i = 0; i < d_; ++i) {
      const float xhat = (x[i] - mean) * rstd;
      const float g = dy[i] * w[i];
      mean_g += g;
      mean_gx += g * xhat;
      db[i] += dy[i];
      dw[i] += dy[i] * xhat;
    }
    mean_g /= d_;
    mean_gx /= d_;
    if (!need_input_grad) continue;
    float* dx = dx_.data() + r * d_;
    for (int64_t i = 0; i < d_; ++i) {
      const float xhat = (x[i] - mean) * rstd;
      dx[i] = rstd * (dy[i] * w[i] - mean_g - xhat * mean_gx);
    }
  }
  sink.ready(b_);
  sink.ready(w_);
  return dx_;
}

}  // namespace dpt
