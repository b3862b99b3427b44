// gpu_ops: the kernels and cuBLAS calls models/ runs on a CUDA device, behind a header
// without CUDA headers, so the layers compile the same with and without CUDA. Device
// memory, copies and the stream are device/runtime.h's. Implemented by gpu_ops.cu (built
// with CUDA) or gpu_ops_absent.cpp: there no device memory can exist (device/ refuses
// every allocation), so no layer reaches these; each is a link placeholder raising
// device/'s "no CUDA" error.
//
// Terms:
//   device pointer  memory from device::alloc on the current device (device::current()).
//   stream          every kernel and cuBLAS call here runs on the current thread's
//                   default stream (device/'s kernel stream), in issue order; copies to
//                   the host (device::copy) are synchronous, so a host read after one
//                   sees every earlier kernel's result.
//   row-major       as in models/kernels/cpu/gemm.h: sgemm takes the same arguments as dpt::sgemm
//                   (cuBLAS is column-major; the wrapper computes C^T = op(B)^T op(A)^T).
// The functions mirror the host loops of the layers that call them, in float32 (cuBLAS in
// its default, non-TF32 mode), so a model gives the same numbers on both within rounding.
// Failures throw device::DeviceError with CUDA's text.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dpt::gpu {

// C = alpha op(A) op(B) + beta C, row-major (models/kernels/cpu/gemm.h).
void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);
// `batch` such products; operand i starts stride_* elements after operand i-1.
void sgemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                   int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c,
                   int ldc, int64_t stride_c, int batch);
// The same products with A and B rounded to bf16 (or fp16) and fp32 accumulation, on
// tensor cores (cuBLASLt, gpu_gemm_half.cu): --precision bf16 (fp16) on CUDA, as autocast
// runs a matmul.
void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc);
void gemm_bf16_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                       int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c, int ldc,
                       int64_t stride_c, int batch);
void gemm_f16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
              const float* b, int ldb, float beta, float* c, int ldc);
void gemm_f16_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                      int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c, int ldc,
                      int64_t stride_c, int batch);

// Linear: y[r, :] = bias; db[c] += sum_r dy[r, c].
void fill_rows(float* y, const float* bias, int rows, int cols);
void add_column_sums(float* db, const float* dy, int rows, int cols);
void add(const float* a, const float* b, float* out, size_t n);
void relu_forward(const float* x, float* y, size_t n);
void relu_backward(const float* y, const float* dy, float* dx, size_t n);  // y > 0 is the mask
// GELU (tanh form); tanh_out keeps tanh(u) for backward, as the host layer does.
void gelu_forward(const float* x, float* y, float* tanh_out, size_t n);
void gelu_backward(const float* x, const float* tanh_in, const float* dy, float* dx, size_t n);
// LayerNorm over rows of width d; mean/rstd [rows] are kept for backward. Backward adds
// into dw/db and writes dx unless it is null.
void layer_norm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                        int rows, int d, float eps);
void layer_norm_backward(const float* x, const float* w, const float* mean, const float* rstd, const float* dy,
                         float* dx, float* dw, float* db, int rows, int d);
// Causal softmax in place over `mats` [t, t] score matrices (row i keeps columns <= i,
// the rest become 0), and its backward: dp becomes dS = P * (dP - rowsum(dP * P)).
void causal_softmax_forward(float* p, int mats, int t);
void causal_softmax_backward(const float* p, float* dp, int mats, int t);
// Fused causal attention (gpu_attention.cu, flash-attention style): per (b, h), out =
// softmax(scale Q K^T, causal) V without forming T x T. qkv [B, T, 3d] and out [B, T, d]
// in the layer's layout (models/nn/layers/attention.h); lse [B, H, T] keeps each row's
// log-sum-exp for backward, which writes every element of dqkv [B, T, 3d] (delta
// [B, H, T] is its scratch). No atomics: the same bits every run. math: f32 on the CUDA
// cores (head widths up to 128), or bf16 / f16 operands on tensor cores with fp32
// accumulation (widths up to 64; wider heads run f32).
// With `drop` on (f32 only), attention dropout: out = dropout(P) V with the mask the
// materialized path applies to the [B, H, T, T] probabilities (element ((b H + h) T + i) T
// + j), computed on the fly in forward and again in backward.
enum class AttentionMath { f32, bf16, f16 };
// A dropout mask (models/nn/layers/dropout.h; drop_mask.cuh applies it on the device):
// threshold = p * 2^24, scale = 1 / (1 - p), key = the forward's draw key.
struct DropMask {
  bool on = false;
  uint32_t threshold = 0;
  float scale = 1.0f;
  uint64_t key = 0;
};
bool attention_fused_supports(int head_width, AttentionMath math);
void attention_forward(const float* qkv, float* out, float* lse, int b, int t, int heads, int head_width,
                       float scale, AttentionMath math, const DropMask& drop = {});
void attention_backward(const float* qkv, const float* out, const float* dout, const float* lse, float* delta,
                        float* dqkv, int b, int t, int heads, int head_width, float scale, AttentionMath math,
                        const DropMask& drop = {});
// Embedding: y[i, :] = table[tokens[i]] (+ pos[i mod t]) for n*t tokens. Token ids are
// checked on the host first. Backward adds dy rows into dtable (and dpos unless null)
// without atomics: `groups` is models/nn/token_groups.h's TokenGroups::words() on the device
// (the positions of each distinct id, in increasing order), and each table row and
// position row is one thread per channel adding its rows in position order, the host
// loop's order: the same bits as the CPU for the same dy, on every run.
void embedding_forward(const int32_t* tokens, const float* table, const float* pos, float* y, int count, int t,
                       int d);
void embedding_backward(const int32_t* groups, int distinct, const float* dy, float* dtable, float* dpos, int count,
                        int t, int d);
// Softmax cross entropy per row: row_loss[r] = logsumexp(z) - z[label], grad =
// (softmax - onehot) * g_scale; a row whose label is ignore_label gets loss 0 and a zero
// gradient. Labels are checked on the host first. grad may be logits itself (in place).
void softmax_cross_entropy(const float* logits, const int32_t* labels, float* grad, float* row_loss, int rows,
                           int classes, float g_scale, int32_t ignore_label);
// x = float(half(x)), round to nearest even: what ComputePrecision::kF16 does to every
// activation and gradient (models/kernels/cpu/f16_round.h's rounding, the same values).
void round_to_f16(float* x, size_t n);
// Dropout with the host's counter-based mask (models/nn/layers/dropout.h): y[i] = x[i] *
// (draw(key, offset + i) < threshold ? 0 : scale); y may be x.
void dropout_apply(const float* x, float* y, size_t n, uint32_t threshold, float scale, uint64_t draw_key,
                   uint64_t offset);

// ---- Image layers (gpu_conv.cu: cuDNN 9, opened on first use; gpu_cnn_ops.cu) ----
// NCHW fp32; a plane is the H * W values of one (sample, channel).
// Operand types: f32 on the CUDA cores (no TF32); bf16 and f16 round x, w and dy to that
// type, run on tensor cores with fp32 accumulation and round the result (y, dx, dw) to it
// before widening back to fp32, as an autocast convolution does (--precision bf16/fp16).
enum class ConvType { f32, bf16, f16 };
struct ConvShape {
  int n, c, h, w;   // input
  int oc, k, stride, pad;
  int oh, ow;       // output
  ConvType type = ConvType::f32;
};
// y = conv(x, w) (OIHW weights, cross-correlation, no bias); dx = conv's input gradient;
// dw += conv's weight gradient. Deterministic algorithms (the same bits every run).
void conv2d_forward(const ConvShape& s, const float* x, const float* w, float* y);
void conv2d_backward_data(const ConvShape& s, const float* w, const float* dy, float* dx);
void conv2d_backward_filter(const ConvShape& s, const float* x, const float* dy, float* dw);
// y[n, c, :] += b[c]; db[c] += sum over samples and positions of dy[n, c, :].
void add_channel_bias(float* y, const float* b, int n, int c, int plane);
void add_channel_sums(float* db, const float* dy, int n, int c, int plane);
// BatchNorm (models/nn/layers/batch_norm.h): out[c] = sum of channel c's values, out[C + c]
// = their squared deviations from float(sum / count), in double (device memory).
void channel_moments(const float* x, int n, int c, int plane, double* out);
// y = x w invstd + (b - mean w invstd), then max(y, 0) when relu.
void batch_norm_forward(const float* x, const float* mean, const float* invstd, const float* w, const float* b,
                        float* y, int n, int c, int plane, bool relu);
// out[c] = sum of g, out[C + c] = sum of g (x - mean), g = dy (0 where y <= 0 with relu).
void batch_norm_grad_sums(const float* x, const float* y, const float* dy, const float* mean, int n, int c, int plane,
                          bool relu, double* out);
// dx = w invstd (g - mean_g - (x - mean) invstd mean_gxhat) per channel (training), or
// w invstd g when mean_g is null (evaluation).
void batch_norm_backward_input(const float* x, const float* y, const float* dy, const float* mean,
                               const float* invstd, const float* w, const float* mean_g, const float* mean_gxhat,
                               float* dx, int n, int c, int plane, bool relu);
// BatchNorm's per-channel arithmetic (batch_norm_stat_kernels.cuh): training statistics
// and the running buffers' update from channel_moments' sums; evaluation statistics from
// the running buffers; the parameter gradients and dx's coefficients from
// batch_norm_grad_sums' sums (mean_g and mean_gxhat null in evaluation). All device
// memory, all queued: nothing waits for the device.
void batch_norm_statistics(const double* sums, int c, double count, float eps, float momentum, float* mean,
                           float* invstd, float* running_mean, float* running_var, float* num_batches);
void batch_norm_eval_statistics(const float* running_mean, const float* running_var, int c, float eps, float* mean,
                                float* invstd);
void batch_norm_grad_finalize(const double* sums, const float* invstd, int c, double count, float* grad_w,
                              float* grad_b, float* mean_g, float* mean_gxhat);
// Max pooling over `planes` planes; argmax keeps, per output, the flat index in its input
// plane that it took (backward adds each output's gradient there).
void max_pool_forward(const float* x, float* y, int32_t* argmax, int planes, int h, int w, int oh, int ow, int k,
                      int stride, int pad);
void max_pool_backward(const float* dy, const int32_t* argmax, float* dx, int planes, int h, int w, int oh, int ow,
                       int k, int stride, int pad);
// AdaptiveAvgPool2d (PyTorch's cells; models/nn/layers/avg_pool.h).
void adaptive_avg_pool_forward(const float* x, float* y, int planes, int h, int w, int oh, int ow);
void adaptive_avg_pool_backward(const float* dy, float* dx, int planes, int h, int w, int oh, int ow);

}  // namespace dpt::gpu
