// gpu_ops.h in a build without CUDA. Link placeholders only: no device memory exists
// there (device/runtime.h, the one place that knows CUDA is absent, refuses every
// allocation), so no layer can call these; each raises device/'s "no CUDA" error.
#include "models/kernels/cuda/gpu_ops.h"

#include "device/runtime.h"

namespace dpt::gpu {

namespace {
[[noreturn]] void absent(const char* what) { device::throw_not_built(what); }
}  // namespace

void sgemm(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int) {
  absent("sgemm");
}
void sgemm_batched(bool, bool, int, int, int, float, const float*, int, int64_t, const float*, int, int64_t, float,
                   float*, int, int64_t, int) {
  absent("sgemm_batched");
}
void gemm_bf16(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int) {
  absent("gemm_bf16");
}
void gemm_bf16_batched(bool, bool, int, int, int, float, const float*, int, int64_t, const float*, int, int64_t,
                       float, float*, int, int64_t, int) {
  absent("gemm_bf16_batched");
}
void gemm_f16(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int) {
  absent("gemm_f16");
}
void gemm_f16_batched(bool, bool, int, int, int, float, const float*, int, int64_t, const float*, int, int64_t,
                      float, float*, int, int64_t, int) {
  absent("gemm_f16_batched");
}
void fill_rows(float*, const float*, int, int) { absent("fill_rows"); }
void add_column_sums(float*, const float*, int, int) { absent("add_column_sums"); }
void add(const float*, const float*, float*, size_t) { absent("add"); }
void relu_forward(const float*, float*, size_t) { absent("relu_forward"); }
void relu_backward(const float*, const float*, float*, size_t) { absent("relu_backward"); }
void gelu_forward(const float*, float*, float*, size_t) { absent("gelu_forward"); }
void gelu_backward(const float*, const float*, const float*, float*, size_t) { absent("gelu_backward"); }
void layer_norm_forward(const float*, const float*, const float*, float*, float*, float*, int, int, float) {
  absent("layer_norm_forward");
}
void layer_norm_backward(const float*, const float*, const float*, const float*, const float*, float*, float*,
                         float*, int, int) {
  absent("layer_norm_backward");
}
bool attention_fused_supports(int head_width, AttentionMath math) {
  return head_width > 0 && head_width <= (math == AttentionMath::f32 ? 128 : 64);
}
void attention_forward(const float*, float*, float*, int, int, int, int, float, AttentionMath, const DropMask&) {
  absent("attention_forward");
}
void attention_backward(const float*, const float*, const float*, const float*, float*, float*, int, int, int, int,
                        float, AttentionMath, const DropMask&) {
  absent("attention_backward");
}
void causal_softmax_forward(float*, int, int) { absent("causal_softmax_forward"); }
void causal_softmax_backward(const float*, float*, int, int) { absent("causal_softmax_backward"); }
void embedding_forward(const int32_t*, const float*, const float*, float*, int, int, int) {
  absent("embedding_forward");
}
void embedding_backward(const int32_t*, int, const float*, float*, float*, int, int, int) {
  absent("embedding_backward");
}
void softmax_cross_entropy(const float*, const int32_t*, float*, float*, int, int, float, int32_t) {
  absent("softmax_cross_entropy");
}
void dropout_apply(const float*, float*, size_t, uint32_t, float, uint64_t, uint64_t) { absent("dropout_apply"); }
void round_to_f16(float*, size_t) { absent("round_to_f16"); }
void conv2d_forward(const ConvShape&, const float*, const float*, float*) { absent("conv2d_forward"); }
void conv2d_backward_data(const ConvShape&, const float*, const float*, float*) { absent("conv2d_backward_data"); }
void conv2d_backward_filter(const ConvShape&, const float*, const float*, float*) {
  absent("conv2d_backward_filter");
}
void add_channel_bias(float*, const float*, int, int, int) { absent("add_channel_bias"); }
void add_channel_sums(float*, const float*, int, int, int) { absent("add_channel_sums"); }
void channel_moments(const float*, int, int, int, double*) { absent("channel_moments"); }
void batch_norm_forward(const float*, const float*, const float*, const float*, const float*, float*, int, int, int,
                        bool) {
  absent("batch_norm_forward");
}
void batch_norm_grad_sums(const float*, const float*, const float*, const float*, int, int, int, bool, double*) {
  absent("batch_norm_grad_sums");
}
void batch_norm_backward_input(const float*, const float*, const float*, const float*, const float*, const float*,
                               const float*, const float*, float*, int, int, int, bool) {
  absent("batch_norm_backward_input");
}
void batch_norm_statistics(const double*, int, double, float, float, float*, float*, float*, float*, float*) {
  absent("batch_norm_statistics");
}
void batch_norm_eval_statistics(const float*, const float*, int, float, float*, float*) {
  absent("batch_norm_eval_statistics");
}
void batch_norm_grad_finalize(const double*, const float*, int, double, float*, float*, float*, float*) {
  absent("batch_norm_grad_finalize");
}
void max_pool_forward(const float*, float*, int32_t*, int, int, int, int, int, int, int, int) {
  absent("max_pool_forward");
}
void max_pool_backward(const float*, const int32_t*, float*, int, int, int, int, int, int, int, int) {
  absent("max_pool_backward");
}
void adaptive_avg_pool_forward(const float*, float*, int, int, int, int, int) { absent("adaptive_avg_pool_forward"); }
void adaptive_avg_pool_backward(const float*, float*, int, int, int, int, int) {
  absent("adaptive_avg_pool_backward");
}

}  // namespace dpt::gpu
