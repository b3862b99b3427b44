// The dropout mask on the device (models/nn/layers/dropout.h defines it): element `index` of
// a tensor is kept when the top 24 bits of mix64(key + index * golden) are >= threshold,
// and a kept element is multiplied by scale; the same integers as the host's loop, so a
// GPU run drops what a CPU run drops. Shared by the dropout kernel (gpu_ops.cu) and the
// fused attention kernels (gpu_attention_kernels.cuh), which apply the attention
// probabilities' mask on the fly instead of storing it; a header of __device__ functions
// only, so the CUDA emulation of the tests can run it too.
#pragma once

#include <cstdint>

#include "models/kernels/cuda/gpu_ops.h"

namespace dpt::gpu {

__device__ __forceinline__ uint64_t drop_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// 0 where element `index` is dropped, m.scale where it is kept (1 when m is off).
__device__ __forceinline__ float drop_factor(const DropMask& m, uint64_t index) {
  if (!m.on) return 1.0f;
  const uint32_t draw = uint32_t(drop_mix64(m.key + index * 0x9e3779b97f4a7c15ull) >> 40);
  return draw < m.threshold ? 0.0f : m.scale;
}

}  // namespace dpt::gpu
