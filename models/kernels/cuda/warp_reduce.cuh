// A warp's 32 lanes reduced by butterfly shuffles: every lane ends with the result. Every
// lane of the warp must call (the full mask). Shared by gpu_ops.cu's row kernels and
// softmax_xent_kernel.cuh, a header so that tests/support/cuda_emulation.h can run it.
#pragma once

namespace dpt::gpu {

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace dpt::gpu
