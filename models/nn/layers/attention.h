// Causal multi-head self-attention, as in GPT-2.
// Terms: B batch, T sequence length, d model width, H heads, hd = d/H head width.
//   qkv = x Wqkv^T + b       [B, T, 3d]; columns [0,d) are Q, [d,2d) K, [2d,3d) V,
//                            head h uses columns h*hd .. (h+1)*hd of each.
//   S   = Q K^T / sqrt(hd)   [T, T] per (b, h), masked to j <= i (causal),
//   P   = softmax_rows(S),   O = P V  -> written into [B, T, d] at head h's columns,
//   y   = O Wproj^T + b.
// The per-head products are sgemm calls on strided views (lda = 3d), no copies.
// Backward per (b, h): dP = dO V^T, dV = P^T dO, dS = P*(dP - rowsum(dP*P)),
// dQ = dS K / sqrt(hd), dK = dS^T Q / sqrt(hd).
// With attention dropout (GPT-2's attn_pdrop), O = D V where D = dropout(P): then
// dV = D^T dO and dP = dropout(dD) with the same mask before the softmax backward.
// The sub-layers' names and weight layout come from GptBlockSpec (models/nn/layers/gpt_spec.h).
#pragma once

#include "models/kernels/cuda/gpu_ops.h"
#include "models/nn/layer.h"
#include "models/nn/layers/dropout.h"
#include "models/nn/layers/gpt_spec.h"
#include "models/nn/layers/linear.h"

namespace dpt {

// How CausalAttentionCore runs on CUDA. fused (the default): gpu::attention_forward and
// attention_backward, flash-attention style, memory O(T) per row instead of the T x T
// scores; at the pass's precision: bf16 / fp16 operands on tensor cores for heads up to
// 64 wide, fp32 on the CUDA cores otherwise. materialized: the [B, H, T, T] scores and
// probabilities through cuBLAS, products at the pass's GemmPrecision; it also runs where
// the fused kernels do not apply (heads wider than 128; attention dropout in a bf16 or
// fp16 pass: the fp32 fused kernels apply dropout's mask on the fly, the tensor-core ones
// do not).
// The environment's DPT_CUDA_ATTENTION=fused|materialized sets the process's default.
enum class CudaAttention { fused, materialized };
void set_cuda_attention(CudaAttention a);
CudaAttention cuda_attention();

// The parameter-free middle part: qkv [B, T, 3d] -> O [B, T, d].
class CausalAttentionCore : public Layer {
 public:
  CausalAttentionCore(const std::string& name, int64_t dim, int64_t heads, float dropout = 0.0f,
                      const std::string& dropout_name = "");
  void init_params(ParamStore& store, uint64_t seed) override { drop_.init_params(store, seed); }
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }

 private:
  int64_t d_, h_, hd_;
  int64_t b_ = 0, t_ = 0;
  const Tensor* qkv_ = nullptr;
  Dropout drop_;  // on P; its mask is applied per (b, h) slice
  Tensor probs_;  // P for every (b, h): [B, H, T, T]
  Tensor dropped_;  // D = dropout(P), when dropout is active
  const Tensor& mixed() const { return drop_.active() ? dropped_ : probs_; }  // what multiplies V
  Tensor y_, dqkv_;
  std::vector<float> dp_;  // scratch: dP then dS of one sample, [H, T, T]
  Tensor dp_device_;       // on the device: dP for every (b, h), [B, H, T, T]
  bool fused_ = false;     // this forward ran the fused kernels (CUDA)
  gpu::AttentionMath math_ = gpu::AttentionMath::f32;  // ... with this arithmetic (backward runs the same)
  Tensor lse_, delta_;     // fused: each row's log-sum-exp, and backward's dout . O, [B, H, T]
  const Tensor& forward_cuda(const Tensor& in, float scale);
  const Tensor& backward_cuda(const Tensor& dout, float scale);
  const Tensor& forward_fused(const Tensor& in, float scale);
  const Tensor& backward_fused(const Tensor& dout, float scale);
  // The last forward's dropout mask for the fused kernels (off when it dropped nothing).
  gpu::DropMask drop_mask() const;
};

// qkv projection, core, output projection, residual dropout: the full attention sub-layer.
class CausalSelfAttention : public Layer {
 public:
  CausalSelfAttention(ParamStore& store, const std::string& name, const GptBlockSpec& spec);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }
  std::vector<size_t> used_params() const override;

 private:
  Linear qkv_;
  CausalAttentionCore core_;
  Linear proj_;
  Dropout resid_drop_;
};

}  // namespace dpt
