// Launches of the fused causal attention kernels: gpu_ops.h attention_forward /
// attention_backward. fp32 on the CUDA cores (gpu_attention_kernels.cuh), or bf16 / fp16
// operands on tensor cores (gpu_attention_tc_kernels.cuh); each header says what its
// kernels compute and how.
#include <cuda_runtime.h>
#include <mma.h>

#include <stdexcept>

#include "models/kernels/cuda/cuda_check.h"
#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cuda/half_types.cuh"
// After half_types.cuh: the tensor-core kernels round with its round_into.
#include "models/kernels/cuda/gpu_attention_kernels.cuh"
#include "models/kernels/cuda/gpu_attention_tc_kernels.cuh"

namespace dpt::gpu {

namespace {

namespace fp32 = attention_kernels;
namespace tc = attention_tc_kernels;

int padded_width(int hd) { return hd <= 32 ? 32 : hd <= 64 ? 64 : 128; }

bool on_tensor_cores(int hd, AttentionMath math) { return math != AttentionMath::f32 && hd <= tc::kHd; }

// The tensor-core kernels apply no dropout mask: a caller with dropout runs f32.
void check_dropout(const DropMask& drop, int hd, AttentionMath math) {
  if (drop.on && on_tensor_cores(hd, math))
    throw std::logic_error("fused attention: dropout runs on the fp32 kernels only (AttentionMath::f32)");
}

dim3 grid_for(int b, int t, int heads, int rows) { return dim3(unsigned((t + rows - 1) / rows), unsigned(b * heads)); }

template <typename Half>
void tc_forward(const float* qkv, float* out, float* lse, int b, int t, int heads, int hd, float scale) {
  tc::attention_tc_fwd_k<Half><<<grid_for(b, t, heads, tc::kRows), tc::kThreads>>>(qkv, out, lse, t, heads, hd, scale);
}

template <typename Half>
void tc_backward(const float* qkv, const float* dout, const float* lse, const float* delta, float* dqkv, int b, int t,
                 int heads, int hd, float scale) {
  const dim3 grid = grid_for(b, t, heads, tc::kRows);
  tc::attention_tc_dq_k<Half><<<grid, tc::kThreads>>>(qkv, dout, lse, delta, dqkv, t, heads, hd, scale);
  tc::attention_tc_dkv_k<Half><<<grid, tc::kThreads>>>(qkv, dout, lse, delta, dqkv, t, heads, hd, scale);
}

}  // namespace

bool attention_fused_supports(int head_width, AttentionMath math) {
  return head_width > 0 && head_width <= (math == AttentionMath::f32 ? 128 : tc::kHd);
}

void attention_forward(const float* qkv, float* out, float* lse, int b, int t, int heads, int hd, float scale,
                       AttentionMath math, const DropMask& drop) {
  if (!b || !t) return;
  check_dropout(drop, hd, math);
  if (on_tensor_cores(hd, math)) {
    if (math == AttentionMath::bf16) tc_forward<__nv_bfloat16>(qkv, out, lse, b, t, heads, hd, scale);
    else tc_forward<__half>(qkv, out, lse, b, t, heads, hd, scale);
    check_launch("attention_forward (tensor cores)");
    return;
  }
  const dim3 grid = grid_for(b, t, heads, fp32::kRows);
  switch (padded_width(hd)) {
    case 32: fp32::attention_fwd_k<32><<<grid, fp32::kRows * 1>>>(qkv, out, lse, t, heads, hd, scale, drop); break;
    case 64: fp32::attention_fwd_k<64><<<grid, fp32::kRows * 2>>>(qkv, out, lse, t, heads, hd, scale, drop); break;
    default: fp32::attention_fwd_k<128><<<grid, fp32::kRows * 4>>>(qkv, out, lse, t, heads, hd, scale, drop); break;
  }
  check_launch("attention_forward");
}

void attention_backward(const float* qkv, const float* out, const float* dout, const float* lse, float* delta,
                        float* dqkv, int b, int t, int heads, int hd, float scale, AttentionMath math,
                        const DropMask& drop) {
  if (!b || !t) return;
  check_dropout(drop, hd, math);
  const size_t rows = size_t(b) * heads * t;
  fp32::attention_delta_k<<<unsigned((rows * 32 + 255) / 256), 256>>>(out, dout, delta, b, t, heads, hd);
  check_launch("attention_backward (delta)");
  if (on_tensor_cores(hd, math)) {
    if (math == AttentionMath::bf16) tc_backward<__nv_bfloat16>(qkv, dout, lse, delta, dqkv, b, t, heads, hd, scale);
    else tc_backward<__half>(qkv, dout, lse, delta, dqkv, b, t, heads, hd, scale);
    check_launch("attention_backward (tensor cores)");
    return;
  }
  const dim3 grid = grid_for(b, t, heads, fp32::kRows);
  switch (padded_width(hd)) {
    case 32:
      fp32::attention_dq_k<32><<<grid, fp32::kRows * 1>>>(qkv, dout, lse, delta, dqkv, t, heads, hd, scale, drop);
      fp32::attention_dkv_k<32><<<grid, fp32::kRows * 1>>>(qkv, dout, lse, delta, dqkv, t, heads, hd, scale, drop);
      break;
    case 64:
      fp32::attention_dq_k<64><<<grid, fp32::kRows * 2>>>(qkv, dout, lse, delta, dqkv, t, heads, hd, scale, drop);
      fp32::attention_dkv_k<64><<<grid, fp32::kRows * 2>>>(qkv, dout, lse, delta, dqkv, t, heads, hd, scale, drop);
      break;
    default:
      fp32::attention_dq_k<128><<<grid, fp32::kRows * 4>>>(qkv, dout, lse, delta, dqkv, t, heads, hd, scale, drop);
      fp32::attention_dkv_k<128><<<grid, fp32::kRows * 4>>>(qkv, dout, lse, delta, dqkv, t, heads, hd, scale, drop);
      break;
  }
  check_launch("attention_backward (dq, dk, dv)");
}

}  // namespace dpt::gpu
