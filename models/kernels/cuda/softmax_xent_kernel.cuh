// Softmax cross entropy over rows of logits on the device (models/nn/loss.h has the
// formulas): one warp per row, the row's maximum and sum of exponentials by warp
// reductions, then each lane writes its columns' gradient, g_scale (softmax - onehot),
// and lane 0 the row's loss. An ignored row (label == ignore_label) gets zeros.
//
// In place: g may be z itself (Loss::forward_sum_over writes the gradient over the
// logits, saving a [rows, c] buffer). Each lane reads a column before it writes it, and
// the one value read across columns, z[label], is read by every lane before the
// reductions and fenced by __syncwarp ahead of the first write, so no lane can overwrite
// it first. A header of kernels only (no launches) so that tests/support/cuda_emulation.h
// can run it on CPU threads (models_softmax_xent_emulated); gpu_ops.cu launches it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/kernels/cuda/warp_reduce.cuh"

namespace dpt::gpu::xent_kernels {

constexpr int kWarpsPerBlock = 8;  // 256 threads

__global__ void softmax_xent_k(const float* z, const int32_t* labels, float* g, float* row_loss, int rows, int c,
                               float g_scale, int32_t ignore_label) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* zr = z + size_t(row) * c;
  float* gr = g + size_t(row) * c;
  const int label = labels[row];
  if (label == ignore_label) {  // an ignored target: no loss, no gradient
    for (int j = lane; j < c; j += 32) gr[j] = 0.0f;
    if (lane == 0) row_loss[row] = 0.0f;
    return;
  }
  const float z_label = zr[label];
  float mx = -INFINITY;
  for (int j = lane; j < c; j += 32) mx = fmaxf(mx, zr[j]);
  mx = warp_max(mx);
  float s = 0.0f;
  for (int j = lane; j < c; j += 32) s += expf(zr[j] - mx);
  s = warp_sum(s);
  __syncwarp();  // every lane's read of z[label] is done before any lane writes gr
  const float scale = g_scale / s;
  for (int j = lane; j < c; j += 32) gr[j] = expf(zr[j] - mx) * scale - (j == label ? g_scale : 0.0f);
  if (lane == 0) row_loss[row] = logf(s) + mx - z_label;
}

}  // namespace dpt::gpu::xent_kernels
