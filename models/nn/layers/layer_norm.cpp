#include "models/nn/layers/layer_norm.h"

#include "models/kernels/cuda/gpu_ops.h"

#include <cmath>
#include <stdexcept>

#include "models/nn/init.h"
#include "models/kernels/cpu/parallel_for.h"

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
  // Rows are independent: on parallel_for's threads, the same bits as on one.
  parallel_for(static_cast<int64_t>(rows), parallel_grain(4 * d_), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
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
  });
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
  const float* x_all = x_->data();
  const float* dy_all = dout.data();
  // The parameter gradients sum over rows: split by columns, each column summed over the
  // rows in order, so any number of threads gives the bits one thread gives.
  parallel_for(d_, 64, [&](int64_t i0, int64_t i1) {
    for (size_t r = 0; r < rows; ++r) {
      const float* x = x_all + r * d_;
      const float* dy = dy_all + r * d_;
      const float mean = mean_[r], rstd = rstd_[r];
      for (int64_t i = i0; i < i1; ++i) {
        db[i] += dy[i];
        dw[i] += dy[i] * ((x[i] - mean) * rstd);
      }
    }
  });
  if (need_input_grad) {
    dx_.resize_like(dout);
    parallel_for(static_cast<int64_t>(rows), parallel_grain(6 * d_), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* x = x_all + r * d_;
        const float* dy = dy_all + r * d_;
        const float mean = mean_[r], rstd = rstd_[r];
        float mean_g = 0.0f, mean_gx = 0.0f;
        for (int64_t i = 0; i < d_; ++i) {
          const float xhat = (x[i] - mean) * rstd;
          const float g = dy[i] * w[i];
          mean_g += g;
          mean_gx += g * xhat;
        }
        mean_g /= d_;
        mean_gx /= d_;
        float* dx = dx_.data() + r * d_;
        for (int64_t i = 0; i < d_; ++i) {
          const float xhat = (x[i] - mean) * rstd;
          dx[i] = rstd * (dy[i] * w[i] - mean_g - xhat * mean_gx);
        }
      }
    });
  }
  sink.ready(b_);
  sink.ready(w_);
  return dx_;
}

}  // namespace dpt
