// 16-bit products on tensor cores (gpu_ops.h gemm_bf16 / gemm_f16 and their batched
// forms): each fp32 operand is rounded to bf16 or fp16 (round to nearest even; bf16 as the
// CPU path's models/kernels/cpu/bf16.h, fp16 as models/kernels/cpu/f16_round.h, overflow to inf) into a dense
// scratch copy, then cuBLASLt multiplies with fp32 accumulation (compute type
// CUBLAS_COMPUTE_32F, C and D fp32), as PyTorch's autocast runs a matmul on the GPU.
//
// Terms:
//   half         the 16-bit operand type of a call: bf16 (8 bits of mantissa, fp32's
//                range) or fp16 (11 bits, range to 65504)
//   dense copy   operand i of a batch becomes rows x cols 16-bit values at i * rows * cols
//                in its stored orientation (the layers' operands are slices of wider
//                rows: attention's q, k, v heads of the packed qkv rows). One small
//                kernel gathers and rounds; the copy is what cuBLASLt reads, 256-byte
//                aligned, so every algorithm the heuristic offers applies to it.
//   plan         cuBLASLt's descriptors and the heuristic's first algorithm for one shape
//                (type, transposes, m, n, k, ldc, strides, batch, C's alignment), made on the
//                first call of that shape and kept per thread and device: a training
//                step repeats the same few dozen shapes.
//   workspace    32 MiB per thread and device (cuBLASLt's split-k and stream-k kernels
//                want some; Hopper's recommended size).
// cuBLASLt is opened with dlopen as cuBLAS is in gpu_ops.cu (the reason is there).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "models/kernels/cuda/cuda_check.h"
#include "models/kernels/cuda/device_scratch.h"
#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cuda/half_types.cuh"
#include "models/kernels/cuda/runtime_library.h"

namespace dpt::gpu {

namespace {

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw device::DeviceError(std::string(what) + ": cuBLASLt status " + std::to_string(static_cast<int>(s)));
}

// The cuBLASLt entry points used here, resolved once.
struct LtApi {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

const LtApi& lt() {
  static const LtApi api = [] {
    const std::string name = "libcublasLt.so." DPT_CUBLAS_SOVERSION;
    void* lib = open_runtime_library(name, " (bf16/fp16 products on a GPU)");
    auto sym = [&](auto& f, const char* fname) { load_symbol(lib, name, f, fname); };
    LtApi r;
    sym(r.create, "cublasLtCreate");
    sym(r.desc_create, "cublasLtMatmulDescCreate");
    sym(r.desc_set, "cublasLtMatmulDescSetAttribute");
    sym(r.layout_create, "cublasLtMatrixLayoutCreate");
    sym(r.layout_set, "cublasLtMatrixLayoutSetAttribute");
    sym(r.pref_create, "cublasLtMatmulPreferenceCreate");
    sym(r.pref_set, "cublasLtMatmulPreferenceSetAttribute");
    sym(r.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    sym(r.matmul, "cublasLtMatmul");
    return r;
  }();
  return api;
}

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// Shape of one product, everything the descriptors and the algorithm depend on.
// half type, ta tb m n k ldc stride_c batch c_align
using PlanKey = std::tuple<int, bool, bool, int, int, int, int, int64_t, int, int>;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct ThreadState {
  cublasLtHandle_t handle = nullptr;
  DeviceScratch workspace, a_copy, b_copy;
  std::map<PlanKey, Plan> plans;  // descriptors live as long as the thread (a few dozen shapes)
};

ThreadState& state() {
  thread_local std::map<int, std::unique_ptr<ThreadState>> states;  // per device
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  auto& s = states[dev];
  if (!s) {
    s = std::make_unique<ThreadState>();
    check_lt(lt().create(&s->handle), "cublasLtCreate");
  }
  return *s;
}

// Largest power of two (up to 256) dividing the address: the alignment cuBLASLt may assume.
int alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 4 && a % uintptr_t(align)) align /= 2;
  return align;
}

// Column-major layout (rows x cols, leading dimension ld) of `batch` matrices `stride` apart.
cublasLtMatrixLayout_t layout(cudaDataType_t type, int rows, int cols, int64_t ld, int batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check_lt(lt().layout_create(&l, type, uint64_t(rows), uint64_t(cols), ld), "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const int32_t count = batch;
    check_lt(lt().layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), "batch count");
    check_lt(lt().layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
             "batch stride");
  }
  return l;
}

// Row-major C (m x n) is column-major C^T (n x m) = op(B)^T op(A)^T: cuBLASLt's first
// operand is B. Dense copies: B stored (tb ? n x k : k x n) row-major is column-major
// (tb ? k x n : n x k) with ld its row length; A likewise.
Plan& plan_for(ThreadState& s, cudaDataType_t half, bool ta, bool tb, int m, int n, int k, int ldc,
               int64_t stride_c, int batch, int c_align) {
  const PlanKey key{int(half), ta, tb, m, n, k, ldc, stride_c, batch, c_align};
  auto it = s.plans.find(key);
  if (it != s.plans.end()) return it->second;
  Plan p;
  check_lt(lt().desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(lt().desc_set(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)), "transa");
  check_lt(lt().desc_set(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)), "transb");
  const int b_rows = tb ? k : n, b_cols = tb ? n : k;  // column-major view of B's dense copy
  const int a_rows = ta ? m : k, a_cols = ta ? k : m;
  p.a = layout(half, b_rows, b_cols, b_rows, batch, int64_t(n) * k);
  p.b = layout(half, a_rows, a_cols, a_rows, batch, int64_t(m) * k);
  p.c = layout(CUDA_R_32F, n, m, ldc, batch, stride_c);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(lt().pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = kWorkspaceBytes;
  check_lt(lt().pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), "workspace");
  const uint32_t align = uint32_t(c_align);
  check_lt(lt().pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof(align)), "C alignment");
  check_lt(lt().pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof(align)), "D alignment");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  check_lt(lt().heuristic(s.handle, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found),
           "cublasLtMatmulAlgoGetHeuristic");
  if (found < 1)
    throw device::DeviceError(std::string("cuBLASLt offers no ") + (half == CUDA_R_16F ? "fp16" : "bf16") +
                              " algorithm for m=" + std::to_string(m) + " n=" +
                              std::to_string(n) + " k=" + std::to_string(k) + " batch=" + std::to_string(batch));
  p.algo = result.algo;
  return s.plans.emplace(key, p).first->second;
}

// dst[i][r][c] = half(src[i * stride + r * ld + c]) for `batch` rows x cols slices.
template <typename Half>
__global__ void to_half_dense_k(const float* src, Half* dst, int rows, int cols, int64_t ld, int64_t stride,
                                size_t total) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const size_t per = size_t(rows) * cols;
  const size_t member = i / per, within = i % per;
  const size_t r = within / size_t(cols), c = within % size_t(cols);
  round_into(src[member * stride + r * ld + c], dst + i);
}

template <typename Half>
Half* dense_half(DeviceScratch& into, const float* src, int rows, int cols, int64_t ld, int64_t stride, int batch) {
  const size_t total = size_t(rows) * cols * size_t(batch);
  auto* dst = static_cast<Half*>(into.reserve(total * sizeof(Half)));
  constexpr int kThreads = 256;
  to_half_dense_k<<<unsigned((total + kThreads - 1) / kThreads), kThreads>>>(src, dst, rows, cols, ld, stride, total);
  check_launch("16-bit product (operand rounding)");
  return dst;
}

template <typename Half>
void gemm_half_batched(cudaDataType_t type, bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                       int lda, int64_t sa, const float* b, int ldb, int64_t sb, float beta, float* c, int ldc,
                       int64_t sc, int batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  ThreadState& s = state();
  // Stored orientation: A is (ta ? k x m : m x k) row-major, B is (tb ? n x k : k x n).
  const Half* a16 = dense_half<Half>(s.a_copy, a, ta ? k : m, ta ? m : k, lda, sa, batch);
  const Half* b16 = dense_half<Half>(s.b_copy, b, tb ? n : k, tb ? k : n, ldb, sb, batch);
  Plan& p = plan_for(s, type, ta, tb, m, n, k, ldc, sc, batch, alignment_of(c));
  void* ws = s.workspace.reserve(kWorkspaceBytes);
  check_lt(lt().matmul(s.handle, p.desc, &alpha, b16, p.a, a16, p.b, &beta, c, p.c, c, p.c, &p.algo, ws,
                       kWorkspaceBytes, nullptr),
           type == CUDA_R_16F ? "cublasLtMatmul (fp16)" : "cublasLtMatmul (bf16)");
}

}  // namespace

void gemm_bf16_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, int64_t sa,
                       const float* b, int ldb, int64_t sb, float beta, float* c, int ldc, int64_t sc, int batch) {
  gemm_half_batched<__nv_bfloat16>(CUDA_R_16BF, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                                   batch);
}

void gemm_bf16(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
               float beta, float* c, int ldc) {
  gemm_bf16_batched(ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

void gemm_f16_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, int64_t sa,
                      const float* b, int ldb, int64_t sb, float beta, float* c, int ldc, int64_t sc, int batch) {
  gemm_half_batched<__half>(CUDA_R_16F, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}

void gemm_f16(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) {
  gemm_f16_batched(ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

}  // namespace dpt::gpu
