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
//   row-major       as in models/gemm.h: sgemm takes the same arguments as dpt::sgemm
//                   (cuBLAS is column-major; the wrapper computes C^T = op(B)^T op(A)^T).
// The functions mirror the host loops of the layers that call them, in float32 (cuBLAS in
// its default, non-TF32 mode), so a model gives the same numbers on both within rounding.
// Failures throw device::DeviceError with CUDA's text.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dpt::gpu {

// C = alpha op(A) op(B) + beta C, row-major (models/gemm.h).
void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);
// `batch` such products; operand i starts stride_* elements after operand i-1.
void sgemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                   int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c,
                   int ldc, int64_t stride_c, int batch);

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
// Embedding: y[i, :] = table[tokens[i]] (+ pos[i mod t]) for n*t tokens; backward adds
// dy rows into dtable (and dpos unless null). Token ids are checked on the host first.
void embedding_forward(const int32_t* tokens, const float* table, const float* pos, float* y, int count, int t,
                       int d);
void embedding_backward(const int32_t* tokens, const float* dy, float* dtable, float* dpos, int count, int t,
                        int d);
// Softmax cross entropy per row: row_loss[r] = logsumexp(z) - z[label], grad =
// (softmax - onehot) * g_scale; a row whose label is ignore_label gets loss 0 and a zero
// gradient. Labels are checked on the host first.
void softmax_cross_entropy(const float* logits, const int32_t* labels, float* grad, float* row_loss, int rows,
                           int classes, float g_scale, int32_t ignore_label);
// Dropout with the host's counter-based mask (models/layers/dropout.h): y[i] = x[i] *
// (draw(key, offset + i) < threshold ? 0 : scale); y may be x.
void dropout_apply(const float* x, float* y, size_t n, uint32_t threshold, float scale, uint64_t draw_key,
                   uint64_t offset);

}  // namespace dpt::gpu
