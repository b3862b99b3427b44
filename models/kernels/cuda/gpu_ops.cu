// CUDA implementation of gpu_ops.h: cuBLAS for the matrix products, one small kernel per
// element-wise or row-wise step of the layers.
//
// Terms:
//   row kernels  (layer norm, causal softmax, cross entropy) use one warp per row: the
//                widths here (model width, sequence length, classes) are tens to a few
//                thousand, where a warp's shuffle reductions beat a block's shared memory.
//   handle       one cuBLAS handle per thread and device, made on first use, on the
//                thread's default stream, math mode left at default (no TF32).
//   cuBLAS       loaded with dlopen on first use, not linked: the library and its Lt part
//                are over half a gigabyte whose relocations cost every process that
//                links models/ about 90 ms at start, though most never touch a GPU.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <map>
#include <string>

#include "device/runtime.h"
#include "models/kernels/cuda/cuda_check.h"
#include "models/kernels/cuda/drop_mask.cuh"
#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cuda/runtime_library.h"
#include "models/kernels/cuda/softmax_xent_kernel.cuh"
#include "models/kernels/cuda/warp_reduce.cuh"

namespace dpt::gpu {

namespace {

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw device::DeviceError(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

// The three cuBLAS entry points used here, resolved once.
struct Blas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
};

const Blas& blas() {
  static const Blas b = [] {
    const std::string name = "libcublas.so." DPT_CUBLAS_SOVERSION;
    void* lib = open_runtime_library(name, " (matrix products on a GPU)");
    Blas r;
    load_symbol(lib, name, r.create, "cublasCreate_v2");
    load_symbol(lib, name, r.sgemm, "cublasSgemm_v2");
    load_symbol(lib, name, r.sgemm_strided_batched, "cublasSgemmStridedBatched");
    return r;
  }();
  return b;
}

cublasHandle_t handle() {
  thread_local std::map<int, cublasHandle_t> handles;  // per device; live until the thread ends
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  auto it = handles.find(dev);
  if (it != handles.end()) return it->second;
  cublasHandle_t h = nullptr;
  check_blas(blas().create(&h), "cublasCreate");
  handles.emplace(dev, h);
  return h;
}

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
unsigned warp_blocks(int rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__global__ void fill_rows_k(float* y, const float* b, int rows, int cols) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < size_t(rows) * cols) y[i] = b[i % cols];
}

// One thread per column: consecutive threads read consecutive addresses of a row.
__global__ void column_sums_k(float* db, const float* dy, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int r = 0; r < rows; ++r) s += dy[size_t(r) * cols + c];
  db[c] += s;
}

__global__ void add_k(const float* a, const float* b, float* out, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void relu_fwd_k(const float* x, float* y, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_bwd_k(const float* y, const float* dy, float* dx, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void gelu_fwd_k(const float* x, float* y, float* t_out, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
  y[i] = 0.5f * v * (1.0f + t);
  t_out[i] = t;
}

__global__ void gelu_bwd_k(const float* x, const float* t_in, const float* dy, float* dx, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = x[i], t = t_in[i];
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
  dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
}

__global__ void layer_norm_fwd_k(const float* x, const float* w, const float* b, float* y, float* mean_out,
                                 float* rstd_out, int rows, int d, float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + size_t(row) * d;
  float s = 0.0f;
  for (int i = lane; i < d; i += 32) s += xr[i];
  const float mean = warp_sum(s) / d;
  float v = 0.0f;
  for (int i = lane; i < d; i += 32) v += (xr[i] - mean) * (xr[i] - mean);
  const float rstd = rsqrtf(warp_sum(v) / d + eps);
  float* yr = y + size_t(row) * d;
  for (int i = lane; i < d; i += 32) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

__global__ void layer_norm_bwd_dx_k(const float* x, const float* w, const float* mean, const float* rstd,
                                    const float* dy, float* dx, int rows, int d) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + size_t(row) * d;
  const float* dyr = dy + size_t(row) * d;
  const float m = mean[row], rs = rstd[row];
  float sg = 0.0f, sgx = 0.0f;
  for (int i = lane; i < d; i += 32) {
    const float g = dyr[i] * w[i];
    sg += g;
    sgx += g * (xr[i] - m) * rs;
  }
  const float mean_g = warp_sum(sg) / d, mean_gx = warp_sum(sgx) / d;
  float* dxr = dx + size_t(row) * d;
  for (int i = lane; i < d; i += 32) dxr[i] = rs * (dyr[i] * w[i] - mean_g - (xr[i] - m) * rs * mean_gx);
}

// dw, db: one thread per column, summing over rows.
__global__ void layer_norm_bwd_params_k(const float* x, const float* mean, const float* rstd, const float* dy,
                                        float* dw, float* db, int rows, int d) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= d) return;
  float sw = 0.0f, sb = 0.0f;
  for (int r = 0; r < rows; ++r) {
    const float g = dy[size_t(r) * d + c];
    sb += g;
    sw += g * (x[size_t(r) * d + c] - mean[r]) * rstd[r];
  }
  dw[c] += sw;
  db[c] += sb;
}

__global__ void causal_softmax_fwd_k(float* p, int rows, int t) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int i = row % t;  // position of this row in its matrix: columns 0..i are kept
  float* r = p + size_t(row) * t;
  float mx = -INFINITY;
  for (int j = lane; j <= i; j += 32) mx = fmaxf(mx, r[j]);
  mx = warp_max(mx);
  float s = 0.0f;
  for (int j = lane; j <= i; j += 32) {
    const float e = expf(r[j] - mx);
    r[j] = e;
    s += e;
  }
  const float inv = 1.0f / warp_sum(s);
  for (int j = lane; j < t; j += 32) r[j] = j <= i ? r[j] * inv : 0.0f;
}

__global__ void causal_softmax_bwd_k(const float* p, float* dp, int rows, int t) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int i = row % t;
  const float* pr = p + size_t(row) * t;
  float* dr = dp + size_t(row) * t;
  float dot = 0.0f;
  for (int j = lane; j <= i; j += 32) dot += pr[j] * dr[j];
  dot = warp_sum(dot);
  for (int j = lane; j < t; j += 32) dr[j] = j <= i ? pr[j] * (dr[j] - dot) : 0.0f;
}

__global__ void embedding_fwd_k(const int32_t* tokens, const float* table, const float* pos, float* y, int count,
                                int t, int d) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= size_t(count) * d) return;
  const int tok = int(i / d), c = int(i % d);
  float v = table[size_t(tokens[tok]) * d + c];
  if (pos) v += pos[size_t(tok % t) * d + c];
  y[i] = v;
}

// Table rows: block x = one distinct id, threads = channels; the id's positions (order
// from `start` to `end`) are added in increasing position order, as the host loop adds.
__global__ void embedding_bwd_table_k(const int32_t* order, const int32_t* starts, const int32_t* ids,
                                      const float* dy, float* dtable, int d) {
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= d) return;
  const int g = blockIdx.x;
  float* out = dtable + size_t(ids[g]) * d + c;
  float acc = *out;
  for (int p = starts[g]; p < starts[g + 1]; ++p) acc += dy[size_t(order[p]) * d + c];
  *out = acc;
}

// Position rows: one thread per (position, channel), the samples in order.
__global__ void embedding_bwd_pos_k(const float* dy, float* dpos, int samples, int t, int d) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= size_t(t) * d) return;
  float acc = dpos[i];
  for (int s = 0; s < samples; ++s) acc += dy[size_t(s) * t * d + i];
  dpos[i] = acc;
}

// The host's dropout mask (models/nn/layers/dropout.cpp), in the same integers (drop_mask.cuh).
__global__ void dropout_k(const float* x, float* y, size_t n, DropMask mask) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] * drop_factor(mask, i);
}

__global__ void round_to_f16_k(float* x, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = __half2float(__float2half_rn(x[i]));
}

}  // namespace

void round_to_f16(float* x, size_t n) {
  if (!n) return;
  round_to_f16_k<<<blocks_for(n), kThreads>>>(x, n);
  check_launch("round_to_f16");
}

void sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
           float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  // Row-major C (m x n) is column-major C^T: C^T = op(B)^T op(A)^T, so B goes first.
  check_blas(blas().sgemm(handle(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                         &alpha, b, ldb, a, lda, &beta, c, ldc),
             "cublasSgemm");
}

void sgemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, int64_t sa,
                   const float* b, int ldb, int64_t sb, float beta, float* c, int ldc, int64_t sc, int batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  check_blas(blas().sgemm_strided_batched(handle(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       n, m, k, &alpha, b, ldb, sb, a, lda, sa, &beta, c, ldc, sc, batch),
             "cublasSgemmStridedBatched");
}

void fill_rows(float* y, const float* bias, int rows, int cols) {
  const size_t n = size_t(rows) * cols;
  if (!n) return;
  fill_rows_k<<<blocks_for(n), kThreads>>>(y, bias, rows, cols);
  check_launch("fill_rows");
}

void add_column_sums(float* db, const float* dy, int rows, int cols) {
  if (!cols) return;
  column_sums_k<<<blocks_for(size_t(cols)), kThreads>>>(db, dy, rows, cols);
  check_launch("add_column_sums");
}

void add(const float* a, const float* b, float* out, size_t n) {
  if (!n) return;
  add_k<<<blocks_for(n), kThreads>>>(a, b, out, n);
  check_launch("add");
}

void relu_forward(const float* x, float* y, size_t n) {
  if (!n) return;
  relu_fwd_k<<<blocks_for(n), kThreads>>>(x, y, n);
  check_launch("relu_forward");
}

void relu_backward(const float* y, const float* dy, float* dx, size_t n) {
  if (!n) return;
  relu_bwd_k<<<blocks_for(n), kThreads>>>(y, dy, dx, n);
  check_launch("relu_backward");
}

void gelu_forward(const float* x, float* y, float* tanh_out, size_t n) {
  if (!n) return;
  gelu_fwd_k<<<blocks_for(n), kThreads>>>(x, y, tanh_out, n);
  check_launch("gelu_forward");
}

void gelu_backward(const float* x, const float* tanh_in, const float* dy, float* dx, size_t n) {
  if (!n) return;
  gelu_bwd_k<<<blocks_for(n), kThreads>>>(x, tanh_in, dy, dx, n);
  check_launch("gelu_backward");
}

void layer_norm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                        int rows, int d, float eps) {
  if (!rows) return;
  layer_norm_fwd_k<<<warp_blocks(rows), kThreads>>>(x, w, b, y, mean, rstd, rows, d, eps);
  check_launch("layer_norm_forward");
}

void layer_norm_backward(const float* x, const float* w, const float* mean, const float* rstd, const float* dy,
                         float* dx, float* dw, float* db, int rows, int d) {
  if (!rows) return;
  layer_norm_bwd_params_k<<<blocks_for(size_t(d)), kThreads>>>(x, mean, rstd, dy, dw, db, rows, d);
  check_launch("layer_norm_backward (weights)");
  if (!dx) return;
  layer_norm_bwd_dx_k<<<warp_blocks(rows), kThreads>>>(x, w, mean, rstd, dy, dx, rows, d);
  check_launch("layer_norm_backward (input)");
}

void causal_softmax_forward(float* p, int mats, int t) {
  const int rows = mats * t;
  if (!rows) return;
  causal_softmax_fwd_k<<<warp_blocks(rows), kThreads>>>(p, rows, t);
  check_launch("causal_softmax_forward");
}

void causal_softmax_backward(const float* p, float* dp, int mats, int t) {
  const int rows = mats * t;
  if (!rows) return;
  causal_softmax_bwd_k<<<warp_blocks(rows), kThreads>>>(p, dp, rows, t);
  check_launch("causal_softmax_backward");
}

void embedding_forward(const int32_t* tokens, const float* table, const float* pos, float* y, int count, int t,
                       int d) {
  const size_t n = size_t(count) * d;
  if (!n) return;
  embedding_fwd_k<<<blocks_for(n), kThreads>>>(tokens, table, pos, y, count, t, d);
  check_launch("embedding_forward");
}

void embedding_backward(const int32_t* groups, int distinct, const float* dy, float* dtable, float* dpos, int count,
                        int t, int d) {
  if (!count || !d) return;
  const int32_t* order = groups;  // TokenGroups::words(): order, starts, ids
  const int32_t* starts = groups + count;
  const int32_t* ids = starts + distinct + 1;
  const dim3 grid(unsigned(distinct), unsigned((d + kThreads - 1) / kThreads));
  embedding_bwd_table_k<<<grid, kThreads>>>(order, starts, ids, dy, dtable, d);
  check_launch("embedding_backward (table)");
  if (dpos) {
    embedding_bwd_pos_k<<<blocks_for(size_t(t) * d), kThreads>>>(dy, dpos, count / t, t, d);
    check_launch("embedding_backward (positions)");
  }
}

void softmax_cross_entropy(const float* logits, const int32_t* labels, float* grad, float* row_loss, int rows,
                           int classes, float g_scale, int32_t ignore_label) {
  if (!rows) return;
  static_assert(xent_kernels::kWarpsPerBlock == kWarpsPerBlock);
  xent_kernels::softmax_xent_k<<<warp_blocks(rows), kThreads>>>(logits, labels, grad, row_loss, rows, classes,
                                                                 g_scale, ignore_label);
  check_launch("softmax_cross_entropy");
}

void dropout_apply(const float* x, float* y, size_t n, uint32_t threshold, float scale, uint64_t draw_key,
                   uint64_t offset) {
  if (!n) return;
  DropMask mask;
  mask.on = true;
  mask.threshold = threshold;
  mask.scale = scale;
  mask.key = draw_key + offset * 0x9e3779b97f4a7c15ull;
  dropout_k<<<blocks_for(n), kThreads>>>(x, y, n, mask);
  check_launch("dropout_apply");
}

}  // namespace dpt::gpu
