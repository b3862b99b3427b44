// BatchNorm over dimension 1 of [N, C], [N, C, L] or [N, C, H, W] (PyTorch's
// BatchNorm1d and BatchNorm2d), optionally followed by a fused ReLU.
//
// Terms (per channel c):
//   M        values normalised together: N * L or N * H * W (summed over replicas
//            under SyncBatchNorm).
//   mean, var  the batch's mean and biased variance (sum of squared deviations / M);
//            invstd = 1 / sqrt(var + eps); xhat = (x - mean) * invstd.
//   y        = weight * xhat + bias (then max(y, 0) with the fused ReLU).
// Training: normalise with the batch statistics, then
//   running_mean = (1 - momentum) running_mean + momentum mean,
//   running_var  = (1 - momentum) running_var  + momentum var * M / (M - 1) (unbiased),
//   num_batches_tracked += 1.
// Evaluation: normalise with running_mean and running_var; nothing is updated.
// Backward (g = dy, masked by y > 0 with the fused ReLU):
//   dbias += sum(g), dweight += sum(g * xhat)    (this replica's sums: DDP averages them)
//   dx = weight * invstd * (g - sum(g) / M - xhat * sum(g * xhat) / M)
//   where the two sums are global under SyncBatchNorm (BatchStatsReducer::sum_gradients).
// In evaluation mode dx = g * weight * invstd (the statistics are constants).
// CUDA (batch_norm_cuda.cpp): everything runs as kernels (gpu_ops.h): the per-channel
// sums, the statistics and the running buffers' update (the store's device copy of the
// buffers, param_store.h), the parameter gradients and dx's coefficients, so a step's
// BatchNorm layers move nothing between host and device and never wait for it.
// SyncBatchNorm is the exception: its reducer exchanges host arrays, so the sums come
// down (2C doubles), the host code above combines them and updates the host buffers, and
// mean and invstd (backward: the two means) go up (2C floats), twice per layer per step.
#pragma once

#include "models/kernels/cuda/device_floats.h"
#include "models/nn/layer.h"

namespace dpt {

class BatchNorm : public Layer {
 public:
  BatchNorm(ParamStore& store, const std::string& name, int64_t channels, bool fuse_relu = false,
            float eps = 1e-5f, float momentum = 0.1f);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  std::vector<size_t> used_params() const override { return {w_, b_}; }
  bool supports_cuda() const override { return true; }

 private:
  // Per channel mean and m2 of this replica's batch (float sums over the batch per
  // position, then double sums over a channel's positions).
  void local_moments(const float* x);
  // mean_/var_ from local or gathered moments; updates the running statistics.
  void batch_statistics(BatchStatsReducer* reducer);
  // Throws unless count_ (M) > 1: a variance needs two values.
  void check_count() const;
  const Tensor& forward_cuda(const Tensor& in);
  const Tensor& backward_cuda(const Tensor& dout, GradSink& sink, bool need_input_grad);

  ParamStore& store_;
  int64_t c_;
  bool relu_;
  float eps_, momentum_;
  size_t w_ = 0, b_ = 0;
  size_t running_mean_ = 0, running_var_ = 0, num_batches_ = 0;  // buffer indices
  int64_t n_ = 0, s_ = 0;      // batch size and values per (sample, channel)
  bool training_ = true;       // mode of the last forward
  BatchStatsReducer* reducer_ = nullptr;  // of the last forward (backward's sum)
  const Tensor* x_ = nullptr;
  double count_ = 0;           // M of the last forward
  std::vector<double> sum_, m2_;
  std::vector<float> moments_, gathered_, grad_sums_;
  std::vector<float> mean_, invstd_;  // what the last forward normalised with
  std::vector<float> k_, kx_, k0_;    // per-channel coefficients of the output / input gradient
  // Per-position (C*S) scratch: accumulators and the expanded per-channel constants.
  std::vector<float> acc_a_, acc_b_, mean_e_, k_e_, kx_e_, k0_e_;
  Tensor y_, dx_;
  // CUDA: mean and invstd [2C]; backward's mean_g and mean_gxhat [2C]; the parameter
  // gradients' increments (SyncBatchNorm) [2C]; per-channel double sums [2C doubles].
  DeviceFloats stats_device_, coef_device_, delta_device_, sums_device_;
};

}  // namespace dpt
