// BatchNorm's CUDA path (batch_norm.h): the sums over each channel's N * S values and
// the per-channel arithmetic (statistics, running buffers on the store's device copy,
// gradients) as kernels, queued without waiting. SyncBatchNorm's exchange runs on host
// arrays: its sums come down and its statistics go up, a few floats per channel.
#include <cmath>
#include <vector>

#include "device/runtime.h"
#include "models/kernels/cuda/gpu_ops.h"
#include "models/nn/layers/batch_norm.h"

namespace dpt {

namespace {
// The device array as `count` doubles (a float array of twice the length; device memory
// is 256-byte aligned).
double* as_doubles(DeviceFloats& d, size_t count) {
  d.reserve(2 * count);
  return reinterpret_cast<double*>(d.data());
}

void upload(DeviceFloats& d, const std::vector<float>& a, const std::vector<float>& b) {
  d.reserve(a.size() + b.size());
  device::copy(d.data(), a.data(), a.size() * sizeof(float));
  device::copy(d.data() + a.size(), b.data(), b.size() * sizeof(float));
}
}  // namespace

const Tensor& BatchNorm::forward_cuda(const Tensor& in) {
  const auto C = static_cast<size_t>(c_);
  const int n = int(n_), c = int(c_), s = int(s_);
  stats_device_.reserve(2 * C);
  float* mean = stats_device_.data();
  float* invstd = mean + C;
  if (training_) {
    double* sums = as_doubles(sums_device_, 2 * C);
    count_ = static_cast<double>(n_ * s_);
    if (!reducer_) check_count();  // before any kernel: the layer's state stays as it was
    gpu::channel_moments(in.data(), n, c, s, sums);
    if (reducer_) {
      // SyncBatchNorm: the host combines every replica's moments (batch_statistics).
      std::vector<double> host(2 * C);
      device::copy(host.data(), sums, host.size() * sizeof(double));
      sum_.assign(host.begin(), host.begin() + c_);
      m2_.assign(host.begin() + c_, host.end());
      mean_.resize(C);
      for (size_t ch = 0; ch < C; ++ch) mean_[ch] = static_cast<float>(sum_[ch] / count_);
      batch_statistics(reducer_);
      upload(stats_device_, mean_, invstd_);
    } else {
      gpu::batch_norm_statistics(sums, c, count_, eps_, momentum_, mean, invstd, store_.device_buffer(running_mean_),
                                 store_.device_buffer(running_var_), store_.device_buffer(num_batches_));
      store_.device_buffers_updated();
    }
  } else {
    gpu::batch_norm_eval_statistics(store_.device_buffer(running_mean_), store_.device_buffer(running_var_), c, eps_,
                                    mean, invstd);
  }
  y_.set_device(in.device());
  y_.resize(in.shape());
  gpu::batch_norm_forward(in.data(), mean, invstd, store_.device_param(w_), store_.device_param(b_), y_.data(), n, c,
                          s, relu_);
  return y_;
}

const Tensor& BatchNorm::backward_cuda(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const auto C = static_cast<size_t>(c_);
  const int n = int(n_), c = int(c_), s = int(s_);
  const float* mean = stats_device_.data();
  const float* invstd = stats_device_.data() + C;
  double* sums = as_doubles(sums_device_, 2 * C);
  gpu::batch_norm_grad_sums(x_->data(), y_.data(), dout.data(), mean, n, c, s, relu_, sums);
  if (!reducer_) {
    // This replica's sums are the whole story (plain BatchNorm, or evaluation, where dx
    // needs no means): everything stays on the device.
    float* mean_g = nullptr;
    if (training_) {
      coef_device_.reserve(2 * C);
      mean_g = coef_device_.data();
    }
    gpu::batch_norm_grad_finalize(sums, invstd, c, count_, store_.device_grad(w_), store_.device_grad(b_), mean_g,
                                  mean_g ? mean_g + C : nullptr);
    sink.ready(b_);
    sink.ready(w_);
    if (!need_input_grad) return dx_;
    dx_.resize_like(*x_);
    gpu::batch_norm_backward_input(x_->data(), y_.data(), dout.data(), mean, invstd, store_.device_param(w_), mean_g,
                                   mean_g ? mean_g + C : nullptr, dx_.data(), n, c, s, relu_);
    return dx_;
  }
  // SyncBatchNorm: dx's two sums are global, summed over replicas on the host.
  std::vector<double> host(2 * C);
  device::copy(host.data(), sums, host.size() * sizeof(double));
  // dbias += sum(g), dweight += sum(g * xhat): this replica's sums, as on the host.
  std::vector<float> db(C), dw(C);
  for (size_t ch = 0; ch < C; ++ch) {
    db[ch] = static_cast<float>(host[ch]);
    dw[ch] = static_cast<float>(host[C + ch] * invstd_[ch]);
  }
  upload(delta_device_, db, dw);
  gpu::add(store_.device_grad(b_), delta_device_.data(), store_.device_grad(b_), C);
  gpu::add(store_.device_grad(w_), delta_device_.data() + C, store_.device_grad(w_), C);
  sink.ready(b_);
  sink.ready(w_);
  if (!need_input_grad) return dx_;
  dx_.resize_like(*x_);
  grad_sums_.resize(2 * C);
  for (size_t ch = 0; ch < C; ++ch) {
    grad_sums_[ch] = db[ch];
    grad_sums_[C + ch] = dw[ch];  // sum(g * xhat)
  }
  reducer_->sum_gradients(grad_sums_);
  std::vector<float> mean_g(C), mean_gxhat(C);
  for (size_t ch = 0; ch < C; ++ch) {
    mean_g[ch] = static_cast<float>(grad_sums_[ch] / count_);
    mean_gxhat[ch] = static_cast<float>(grad_sums_[C + ch] / count_);
  }
  upload(coef_device_, mean_g, mean_gxhat);
  gpu::batch_norm_backward_input(x_->data(), y_.data(), dout.data(), mean, invstd, store_.device_param(w_),
                                 coef_device_.data(), coef_device_.data() + C, dx_.data(), n, c, s, relu_);
  return dx_;
}

}  // namespace dpt
