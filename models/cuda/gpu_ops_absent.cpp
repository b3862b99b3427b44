// gpu_ops.h in a build without CUDA. Link placeholders only: no device memory exists
// there (device/runtime.h, the one place that knows CUDA is absent, refuses every
// allocation), so no layer can call these; each raises device/'s "no CUDA" error.
#include "models/cuda/gpu_ops.h"

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
void causal_softmax_forward(float*, int, int) { absent("causal_softmax_forward"); }
void causal_softmax_backward(const float*, float*, int, int) { absent("causal_softmax_backward"); }
void embedding_forward(const int32_t*, const float*, const float*, float*, int, int, int) {
  absent("embedding_forward");
}
void embedding_backward(const int32_t*, const float*, float*, float*, int, int, int) {
  absent("embedding_backward");
}
void softmax_cross_entropy(const float*, const int32_t*, float*, float*, int, int, float, int32_t) {
  absent("softmax_cross_entropy");
}
void dropout_apply(const float*, float*, size_t, uint32_t, float, uint64_t, uint64_t) { absent("dropout_apply"); }

}  // namespace dpt::gpu
