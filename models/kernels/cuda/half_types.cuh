// half_types: fp32 <-> 16-bit conversions shared by the tensor-core paths (the cuBLASLt
// products of gpu_gemm_half.cu, the cuDNN convolutions of gpu_conv.cu). Rounding is to
// nearest even: bf16 as models/kernels/cpu/bf16.h, fp16 as models/kernels/cpu/f16_round.h (overflow to inf), so a
// value the GPU rounds is the value the CPU's emulation rounds to.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

namespace dpt::gpu {

__device__ __forceinline__ void round_into(float v, __nv_bfloat16* d) { *d = __float2bfloat16_rn(v); }
__device__ __forceinline__ void round_into(float v, __half* d) { *d = __float2half_rn(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }

// dst[i] = half(src[i]) for n dense values.
template <typename Half>
__global__ void to_half_k(const float* src, Half* dst, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) round_into(src[i], dst + i);
}

// dst[i] = float(src[i]), or dst[i] += float(src[i]) when accumulate.
template <typename Half>
__global__ void from_half_k(const Half* src, float* dst, size_t n, bool accumulate) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] = accumulate ? dst[i] + widen(src[i]) : widen(src[i]);
}

}  // namespace dpt::gpu
