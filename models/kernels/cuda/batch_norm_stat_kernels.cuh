// BatchNorm's per-channel arithmetic on the device (models/nn/layers/batch_norm.h has the
// formulas): what the host did with the channel sums that came down, so that a training
// step's BatchNorm layers need no host round trip. One thread per channel; C is at most
// a few thousand, so these are tiny launches queued behind the sum kernels.
//
// Each kernel repeats the host's arithmetic step for step (double where the host uses
// double, the same roundings to float), so the device and the host paths normalise with
// the same statistics up to the sums' summation order. A header of kernels only (no
// launches) so that tests/support/cuda_emulation.h can run them on CPU threads
// (models_batch_norm_emulated); gpu_cnn_ops.cu launches them.
#pragma once

namespace dpt::gpu::batch_norm_kernels {

// Training statistics from this replica's sums (channel_moments: sums[c] = sum of x,
// sums[C + c] = squared deviations from float(sum / count)):
//   mean[c], invstd[c]  what the element-wise kernels normalise with,
//   running_mean/var    (1 - momentum) old + momentum batch (the variance unbiased),
//   *num_batches += 1   (thread 0).
__global__ void batch_norm_statistics_k(const double* sums, int c, double count, float eps, float momentum,
                                        float* mean, float* invstd, float* running_mean, float* running_var,
                                        float* num_batches) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch == 0) *num_batches += 1.0f;
  if (ch >= c) return;
  const float m = float(sums[ch] / count);
  const double m2 = sums[c + ch];
  const double var = m2 / count;
  mean[ch] = m;
  invstd[ch] = float(1.0 / sqrt(var + double(eps)));
  const double unbiased = m2 / (count - 1.0);
  running_mean[ch] = float((1.0 - double(momentum)) * double(running_mean[ch]) + double(momentum) * double(m));
  running_var[ch] = float((1.0 - double(momentum)) * double(running_var[ch]) + double(momentum) * unbiased);
}

// Evaluation: normalise with the running statistics (float, as the host).
__global__ void batch_norm_eval_statistics_k(const float* running_mean, const float* running_var, int c, float eps,
                                             float* mean, float* invstd) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  mean[ch] = running_mean[ch];
  invstd[ch] = 1.0f / sqrtf(running_var[ch] + eps);
}

// Backward from this replica's gradient sums (batch_norm_grad_sums: sums[c] = sum g,
// sums[C + c] = sum g (x - mean)):
//   grad_b[c] += sum g, grad_w[c] += sum g xhat      (the parameter gradients),
//   mean_g[c] = sum g / count, mean_gxhat[c] = sum g xhat / count   (dx's coefficients;
//   nullptr in evaluation, where dx needs neither).
__global__ void batch_norm_grad_finalize_k(const double* sums, const float* invstd, int c, double count,
                                           float* grad_w, float* grad_b, float* mean_g, float* mean_gxhat) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const float db = float(sums[ch]);
  const float dw = float(sums[c + ch] * double(invstd[ch]));
  grad_b[ch] += db;
  grad_w[ch] += dw;
  if (mean_g) {
    mean_g[ch] = float(double(db) / count);
    mean_gxhat[ch] = float(double(dw) / count);
  }
}

}  // namespace dpt::gpu::batch_norm_kernels
