// The image layers' kernels (gpu_ops.h): channel bias, BatchNorm, max and adaptive
// average pooling, NCHW fp32, mirroring the host loops of models/nn/layers/ (batch_norm.cpp,
// shape_layers.cpp, avg_pool.cpp, conv2d.cpp's bias).
//
// Terms:
//   plane      the S = H * W values of one (sample, channel).
//   channel    reductions (BatchNorm's moments and gradient sums, a bias gradient) run
//   reduction  one block per channel over its N * S values, summed in double in a fixed
//              tree: the same bits every step, as the host's double channel sums.
//   gather     max pooling's backward visits each input once and adds the gradients of
//   backward   the outputs that chose it (at most ceil(k / stride)^2 of them), in a
//              fixed order, instead of scattering with atomics.
#include <cuda_runtime.h>

#include "models/kernels/cuda/batch_norm_kernels.cuh"
#include "models/kernels/cuda/batch_norm_stat_kernels.cuh"
#include "models/kernels/cuda/block_sum.cuh"
#include "models/kernels/cuda/cuda_check.h"
#include "models/kernels/cuda/gpu_ops.h"

namespace dpt::gpu {

namespace {

constexpr int kThreads = 256;
static_assert(kThreads == batch_norm_kernels::kChannelThreads, "the channel kernels reduce over blocks of this size");
unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void add_channel_bias_k(float* y, const float* b, int c, int plane, size_t total) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < total) y[i] += b[(i / size_t(plane)) % size_t(c)];
}

// One block per channel: db[ch] += sum over samples and positions.
__global__ void add_channel_sums_k(float* db, const float* dy, int n, int c, int plane) {
  const int ch = blockIdx.x;
  double acc = 0.0;
  for (int s = 0; s < n; ++s) {
    const float* p = dy + (size_t(s) * c + ch) * plane;
    for (int j = threadIdx.x; j < plane; j += blockDim.x) acc += p[j];
  }
  const double total = block_sum<kThreads>(acc);
  if (threadIdx.x == 0) db[ch] += float(total);
}

// One thread per output; the window in (ky, kx) order; a larger value or a NaN takes it
// (the host's rule); padding is never chosen.
__global__ void max_pool_forward_k(const float* x, float* y, int32_t* argmax, int h, int w, int oh, int ow, int k,
                                   int stride, int pad, size_t total) {
  const size_t o = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (o >= total) return;
  const size_t plane = o / (size_t(oh) * ow);
  const int oy = int(o / ow % oh), ox = int(o % ow);
  const float* src = x + plane * size_t(h) * w;
  float best = -INFINITY;
  int32_t at = -1;
  for (int ky = 0; ky < k; ++ky) {
    const int iy = oy * stride - pad + ky;
    if (iy < 0 || iy >= h) continue;
    for (int kx = 0; kx < k; ++kx) {
      const int ix = ox * stride - pad + kx;
      if (ix < 0 || ix >= w) continue;
      const float v = src[iy * w + ix];
      if (at < 0 || v > best || v != v) {
        best = v;
        at = iy * w + ix;
      }
    }
  }
  y[o] = best;
  argmax[o] = at;
}

// One thread per input: the outputs whose window covers it, in order.
__global__ void max_pool_backward_k(const float* dy, const int32_t* argmax, float* dx, int h, int w, int oh, int ow,
                                    int k, int stride, int pad, size_t total) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const size_t plane = i / (size_t(h) * w);
  const int iy = int(i / w % h), ix = int(i % w);
  const int32_t self = iy * w + ix;
  // oy * stride - pad <= iy <= oy * stride - pad + k - 1
  const int oy0 = max(0, (iy + pad - k + stride) / stride), oy1 = min(oh - 1, (iy + pad) / stride);
  const int ox0 = max(0, (ix + pad - k + stride) / stride), ox1 = min(ow - 1, (ix + pad) / stride);
  float acc = 0.0f;
  const size_t base = plane * size_t(oh) * ow;
  for (int oy = oy0; oy <= oy1; ++oy)
    for (int ox = ox0; ox <= ox1; ++ox) {
      const size_t o = base + size_t(oy) * ow + ox;
      if (argmax[o] == self) acc += dy[o];
    }
  dx[i] = acc;
}

// PyTorch's adaptive cells: rows [floor(i H / OH), ceil((i + 1) H / OH)).
__device__ int cell_begin(int i, int in, int out) { return (i * in) / out; }
__device__ int cell_end(int i, int in, int out) { return ((i + 1) * in + out - 1) / out; }

__global__ void adaptive_avg_pool_forward_k(const float* x, float* y, int h, int w, int oh, int ow, size_t total) {
  const size_t o = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (o >= total) return;
  const size_t plane = o / (size_t(oh) * ow);
  const int oy = int(o / ow % oh), ox = int(o % ow);
  const int y0 = cell_begin(oy, h, oh), y1 = cell_end(oy, h, oh);
  const int x0 = cell_begin(ox, w, ow), x1 = cell_end(ox, w, ow);
  const float* src = x + plane * size_t(h) * w;
  float acc = 0.0f;
  for (int iy = y0; iy < y1; ++iy)
    for (int ix = x0; ix < x1; ++ix) acc += src[iy * w + ix];
  y[o] = acc / float((y1 - y0) * (x1 - x0));
}

__global__ void adaptive_avg_pool_backward_k(const float* dy, float* dx, int h, int w, int oh, int ow, size_t total) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const size_t plane = i / (size_t(h) * w);
  const int iy = int(i / w % h), ix = int(i % w);
  float acc = 0.0f;
  for (int oy = 0; oy < oh; ++oy) {
    const int y0 = cell_begin(oy, h, oh), y1 = cell_end(oy, h, oh);
    if (iy < y0 || iy >= y1) continue;
    for (int ox = 0; ox < ow; ++ox) {
      const int x0 = cell_begin(ox, w, ow), x1 = cell_end(ox, w, ow);
      if (ix < x0 || ix >= x1) continue;
      acc += dy[plane * size_t(oh) * ow + size_t(oy) * ow + ox] / float((y1 - y0) * (x1 - x0));
    }
  }
  dx[i] = acc;
}

}  // namespace

void add_channel_bias(float* y, const float* b, int n, int c, int plane) {
  const size_t total = size_t(n) * c * plane;
  if (!total) return;
  add_channel_bias_k<<<blocks_for(total), kThreads>>>(y, b, c, plane, total);
  check_launch("add_channel_bias");
}

void add_channel_sums(float* db, const float* dy, int n, int c, int plane) {
  if (!c) return;
  add_channel_sums_k<<<unsigned(c), kThreads>>>(db, dy, n, c, plane);
  check_launch("add_channel_sums");
}

void channel_moments(const float* x, int n, int c, int plane, double* out) {
  if (!c) return;
  batch_norm_kernels::channel_moments_k<<<unsigned(c), kThreads>>>(x, n, c, plane, out);
  check_launch("channel_moments");
}

void batch_norm_forward(const float* x, const float* mean, const float* invstd, const float* w, const float* b,
                        float* y, int n, int c, int plane, bool relu) {
  const size_t total = size_t(n) * c * plane;
  if (!total) return;
  batch_norm_kernels::batch_norm_forward_k<<<blocks_for(total), kThreads>>>(x, mean, invstd, w, b, y, c, plane, total, relu);
  check_launch("batch_norm_forward");
}

void batch_norm_grad_sums(const float* x, const float* y, const float* dy, const float* mean, int n, int c, int plane,
                          bool relu, double* out) {
  if (!c) return;
  batch_norm_kernels::batch_norm_grad_sums_k<<<unsigned(c), kThreads>>>(x, y, dy, mean, n, c, plane, relu, out);
  check_launch("batch_norm_grad_sums");
}

void batch_norm_backward_input(const float* x, const float* y, const float* dy, const float* mean,
                               const float* invstd, const float* w, const float* mean_g, const float* mean_gxhat,
                               float* dx, int n, int c, int plane, bool relu) {
  const size_t total = size_t(n) * c * plane;
  if (!total) return;
  batch_norm_kernels::batch_norm_backward_input_k<<<blocks_for(total), kThreads>>>(x, y, dy, mean, invstd, w, mean_g, mean_gxhat, dx, c,
                                                               plane, total, relu);
  check_launch("batch_norm_backward_input");
}

void batch_norm_statistics(const double* sums, int c, double count, float eps, float momentum, float* mean,
                           float* invstd, float* running_mean, float* running_var, float* num_batches) {
  if (!c) return;
  batch_norm_kernels::batch_norm_statistics_k<<<blocks_for(size_t(c)), kThreads>>>(
      sums, c, count, eps, momentum, mean, invstd, running_mean, running_var, num_batches);
  check_launch("batch_norm_statistics");
}

void batch_norm_eval_statistics(const float* running_mean, const float* running_var, int c, float eps, float* mean,
                                float* invstd) {
  if (!c) return;
  batch_norm_kernels::batch_norm_eval_statistics_k<<<blocks_for(size_t(c)), kThreads>>>(running_mean, running_var, c,
                                                                                        eps, mean, invstd);
  check_launch("batch_norm_eval_statistics");
}

void batch_norm_grad_finalize(const double* sums, const float* invstd, int c, double count, float* grad_w,
                              float* grad_b, float* mean_g, float* mean_gxhat) {
  if (!c) return;
  batch_norm_kernels::batch_norm_grad_finalize_k<<<blocks_for(size_t(c)), kThreads>>>(sums, invstd, c, count, grad_w,
                                                                                      grad_b, mean_g, mean_gxhat);
  check_launch("batch_norm_grad_finalize");
}

void max_pool_forward(const float* x, float* y, int32_t* argmax, int planes, int h, int w, int oh, int ow, int k,
                      int stride, int pad) {
  const size_t total = size_t(planes) * oh * ow;
  if (!total) return;
  max_pool_forward_k<<<blocks_for(total), kThreads>>>(x, y, argmax, h, w, oh, ow, k, stride, pad, total);
  check_launch("max_pool_forward");
}

void max_pool_backward(const float* dy, const int32_t* argmax, float* dx, int planes, int h, int w, int oh, int ow,
                       int k, int stride, int pad) {
  const size_t total = size_t(planes) * h * w;
  if (!total) return;
  max_pool_backward_k<<<blocks_for(total), kThreads>>>(dy, argmax, dx, h, w, oh, ow, k, stride, pad, total);
  check_launch("max_pool_backward");
}

void adaptive_avg_pool_forward(const float* x, float* y, int planes, int h, int w, int oh, int ow) {
  const size_t total = size_t(planes) * oh * ow;
  if (!total) return;
  adaptive_avg_pool_forward_k<<<blocks_for(total), kThreads>>>(x, y, h, w, oh, ow, total);
  check_launch("adaptive_avg_pool_forward");
}

void adaptive_avg_pool_backward(const float* dy, float* dx, int planes, int h, int w, int oh, int ow) {
  const size_t total = size_t(planes) * h * w;
  if (!total) return;
  adaptive_avg_pool_backward_k<<<blocks_for(total), kThreads>>>(dy, dx, h, w, oh, ow, total);
  check_launch("adaptive_avg_pool_backward");
}

}  // namespace dpt::gpu
