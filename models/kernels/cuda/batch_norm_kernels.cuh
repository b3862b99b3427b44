// BatchNorm's element and channel-sum kernels (launched by gpu_cnn_ops.cu): the channel
// moments, the forward (optionally fused with ReLU), the gradient sums with the ReLU mask,
// and the backward to the input. A header of kernels only (no launches), as
// batch_norm_stat_kernels.cuh, so that tests/support/cuda_emulation.h runs them on CPU
// threads against the CPU layer (models_batch_norm_emulated): on a machine without a GPU
// they are checked too.
//
// Terms:
//   plane      the S = H * W values of one (sample, channel).
//   channel    the sum kernels run one block of kChannelThreads per channel over its
//   reduction  N * S values, summed in double in a fixed tree (block_sum.cuh): the same
//              bits every step, as the host's double channel sums.
#pragma once

#include "models/kernels/cuda/block_sum.cuh"

namespace dpt::gpu::batch_norm_kernels {

// Threads of a channel-sum block (the launch must use exactly this many).
constexpr int kChannelThreads = 256;

// out[ch] = sum of x, out[C + ch] = sum of (x - mean)^2 with mean = float(sum / count),
// the host's two passes (local_moments).
__global__ void channel_moments_k(const float* x, int n, int c, int plane, double* out) {
  const int ch = blockIdx.x;
  double acc = 0.0;
  for (int s = 0; s < n; ++s) {
    const float* p = x + (size_t(s) * c + ch) * plane;
    for (int j = threadIdx.x; j < plane; j += blockDim.x) acc += p[j];
  }
  const double sum = block_sum<kChannelThreads>(acc);
  const float mean = float(sum / (double(n) * plane));
  double m2 = 0.0;
  for (int s = 0; s < n; ++s) {
    const float* p = x + (size_t(s) * c + ch) * plane;
    for (int j = threadIdx.x; j < plane; j += blockDim.x) {
      const float d = p[j] - mean;
      m2 += double(d * d);
    }
  }
  const double total_m2 = block_sum<kChannelThreads>(m2);
  if (threadIdx.x == 0) {
    out[ch] = sum;
    out[c + ch] = total_m2;
  }
}

__global__ void batch_norm_forward_k(const float* x, const float* mean, const float* invstd, const float* w,
                                     const float* b, float* y, int c, int plane, size_t total, bool relu) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int ch = int((i / size_t(plane)) % size_t(c));
  const float scale = w[ch] * invstd[ch];
  const float shift = b[ch] - mean[ch] * scale;
  const float v = x[i] * scale + shift;
  y[i] = relu ? fmaxf(v, 0.0f) : v;
}

// out[ch] = sum of g, out[C + ch] = sum of g * (x - mean), g = dy masked by y > 0 (ReLU).
__global__ void batch_norm_grad_sums_k(const float* x, const float* y, const float* dy, const float* mean, int n,
                                       int c, int plane, bool relu, double* out) {
  const int ch = blockIdx.x;
  const float m = mean[ch];
  double sg = 0.0, sgx = 0.0;
  for (int s = 0; s < n; ++s) {
    const size_t base = (size_t(s) * c + ch) * plane;
    for (int j = threadIdx.x; j < plane; j += blockDim.x) {
      const float g = relu && !(y[base + j] > 0.0f) ? 0.0f : dy[base + j];
      sg += g;
      sgx += double(g) * double(x[base + j] - m);
    }
  }
  const double total_g = block_sum<kChannelThreads>(sg);
  const double total_gx = block_sum<kChannelThreads>(sgx);
  if (threadIdx.x == 0) {
    out[ch] = total_g;
    out[c + ch] = total_gx;
  }
}

// dx = k g + kx (x - mean) + k0 with k = w invstd, kx = -k invstd mean_gxhat, k0 = -k mean_g
// (training), or k g (evaluation: mean_g null).
__global__ void batch_norm_backward_input_k(const float* x, const float* y, const float* dy, const float* mean,
                                            const float* invstd, const float* w, const float* mean_g,
                                            const float* mean_gxhat, float* dx, int c, int plane, size_t total,
                                            bool relu) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int ch = int((i / size_t(plane)) % size_t(c));
  const float g = relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
  const float k = w[ch] * invstd[ch];
  if (!mean_g) {
    dx[i] = k * g;
    return;
  }
  const float kx = -k * invstd[ch] * mean_gxhat[ch];
  const float k0 = -k * mean_g[ch];
  dx[i] = k * g + kx * (x[i] - mean[ch]) + k0;
}

}  // namespace dpt::gpu::batch_norm_kernels
