// gemm_bf16 (models/kernels/cpu/gemm.h): bf16 operands, fp32 accumulation and output, on oneDNN's
// matmul primitive where the CPU has AMX-BF16 or AVX512-BF16, emulated elsewhere.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "models/kernels/cpu/bf16.h"
#include "models/kernels/cpu/cpu_features.h"
#include "models/kernels/cpu/gemm.h"
#include "models/kernels/cpu/gemm_engine.h"
#include "models/kernels/cpu/parallel_for.h"

#ifdef DPT_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace dpt {
#ifdef DPT_HAVE_ONEDNN
namespace detail {
void onednn_threads_for(int m, int n, int k);  // models/kernels/cpu/gemm_engine.cpp
}
#endif
namespace {

inline float bf16_rounded(float f) { return bf16_value(bf16_bits(f)); }

void to_bf16_row(const float* s, uint16_t* d, int n) {
  for (int j = 0; j < n; ++j) d[j] = bf16_bits(s[j]);
}
void to_rounded_row(const float* s, float* d, int n) {
  for (int j = 0; j < n; ++j) d[j] = bf16_rounded(s[j]);
}

#if defined(__x86_64__) && defined(__GNUC__)
// VCVTNEPS2BF16 (AVX512-BF16, which every AMX-BF16 CPU has): round to nearest even as
// above, 16 values an instruction. It treats fp32 subnormal inputs (|x| < 2^-126) as
// zero; the scalar code keeps their top bits. Nothing a GEMM operand in training holds
// depends on values below 2^-126.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void to_bf16_row_avx512(const float* s,
                                                                                          uint16_t* d, int n) {
  int j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + j + 16), _mm512_loadu_ps(s + j));
    _mm512_storeu_si512(d + j, reinterpret_cast<__m512i>(v));
  }
  // The rest (short rows: a convolution's output row of 4 to 16 pixels) in one masked step
  // of up to 16 and one of the rest, not element by element.
  for (; j < n; j += 16) {
    const __mmask16 live = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(live, s + j));
    _mm256_mask_storeu_epi16(d + j, live, reinterpret_cast<__m256i>(v));
  }
}
#endif

void to_bf16_row_best(const float* s, uint16_t* d, int n) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512_bf16 = cpu_features().avx512_bf16;
  if (avx512_bf16) return to_bf16_row_avx512(s, d, n);
#endif
  to_bf16_row(s, d, n);
}

// The rows x cols matrix at src (leading dimension ld) into dst densely (leading
// dimension cols), row by row with `row`; on parallel_for's threads when large.
template <class T, class Row>
void convert_dense(const float* src, int rows, int cols, int ld, T* dst, Row row) {
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row(src + r * ld, dst + r * cols, cols);
  };
  if (int64_t(rows) * cols < (int64_t{1} << 16)) body(0, rows);
  else parallel_for(rows, parallel_grain(cols), body);
}

void scale_c(int m, int n, float beta, float* c, int ldc) {
  for (int i = 0; i < m; ++i) {
    float* row = c + static_cast<size_t>(i) * ldc;
    for (int j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
  }
}

// Stored shape of an operand: op(A) is m x k, stored k x m when transposed.
struct Stored {
  int rows, cols;
};
Stored stored_a(bool trans_a, int m, int k) { return trans_a ? Stored{k, m} : Stored{m, k}; }
Stored stored_b(bool trans_b, int k, int n) { return trans_b ? Stored{n, k} : Stored{k, n}; }

void emulated_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                   const float* b, int ldb, float beta, float* c, int ldc) {
  thread_local std::vector<float> ra, rb;
  const Stored sa = stored_a(trans_a, m, k), sb = stored_b(trans_b, k, n);
  ra.resize(size_t(sa.rows) * sa.cols);
  rb.resize(size_t(sb.rows) * sb.cols);
  convert_dense(a, sa.rows, sa.cols, lda, ra.data(), to_rounded_row);
  convert_dense(b, sb.rows, sb.cols, ldb, rb.data(), to_rounded_row);
  sgemm_with(gemm_engine(), trans_a, trans_b, m, n, k, alpha, ra.data(), sa.cols, rb.data(), sb.cols, beta, c, ldc);
}

#ifdef DPT_HAVE_ONEDNN
void check(dnnl_status_t st, const char* what) {
  if (st != dnnl_success)
    throw std::runtime_error(std::string("gemm_bf16: ") + what + " failed with oneDNN status " +
                             std::to_string(int(st)));
}

dnnl_engine_t cpu_engine() {
  // Never destroyed: primitives in thread-local caches may outlive any static's destructor.
  static dnnl_engine_t engine = [] {
    cap_onednn_isa();
    request_amx_permission();  // oneDNN asks too; harmless twice, needed before any tile use
    dnnl_engine_t e = nullptr;
    check(dnnl_engine_create(&e, dnnl_cpu, 0), "dnnl_engine_create");
    return e;
  }();
  return engine;
}

// One matmul for one (transposes, m, n, k, ldc, alpha, beta, threads, batch, C's batch
// stride): operands dense bf16 in their stored layout (A as m x k, or k x m read
// transposed), one such matrix after another for a batch; C f32 with ldc, its batch
// members stride_c apart. batch 1 is a plain 2-D product.
struct Matmul {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr;
  std::string impl;
  Matmul() = default;
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;
  ~Matmul() {
    if (a) dnnl_memory_destroy(a);
    if (b) dnnl_memory_destroy(b);
    if (c) dnnl_memory_destroy(c);
    if (prim) dnnl_primitive_destroy(prim);
  }
};

using MatmulKey = std::tuple<bool, bool, int, int, int, int, float, float, int, int, int64_t>;

std::unique_ptr<Matmul> make_matmul(bool trans_a, bool trans_b, int m, int n, int k, int ldc, float alpha,
                                    float beta, int batch, int64_t stride_c) {
  auto mm = std::make_unique<Matmul>();
  dnnl_memory_desc_t a_md, b_md, c_md;
  const int64_t mk = int64_t(m) * k, kn = int64_t(k) * n;
  dnnl_dims_t a_dims = {batch, m, k}, b_dims = {batch, k, n}, c_dims = {batch, m, n};
  dnnl_dims_t a_strides = {mk, trans_a ? 1 : k, trans_a ? m : 1};
  dnnl_dims_t b_strides = {kn, trans_b ? 1 : n, trans_b ? k : 1};
  dnnl_dims_t c_strides = {stride_c, ldc, 1};
  // batch 1: the 2-D descriptors (the dims and strides after the batch's).
  const int nd = batch == 1 ? 2 : 3, off = 3 - nd;
  check(dnnl_memory_desc_init_by_strides(&a_md, nd, a_dims + off, dnnl_bf16, a_strides + off), "memory desc A");
  check(dnnl_memory_desc_init_by_strides(&b_md, nd, b_dims + off, dnnl_bf16, b_strides + off), "memory desc B");
  check(dnnl_memory_desc_init_by_strides(&c_md, nd, c_dims + off, dnnl_f32, c_strides + off), "memory desc C");
  dnnl_matmul_desc_t desc;
  check(dnnl_matmul_desc_init(&desc, &a_md, &b_md, nullptr, &c_md), "dnnl_matmul_desc_init");
  dnnl_primitive_attr_t attr = nullptr;
  check(dnnl_primitive_attr_create(&attr), "attr");
  std::unique_ptr<dnnl_primitive_attr, decltype(&dnnl_primitive_attr_destroy)> attr_owner(
      attr, &dnnl_primitive_attr_destroy);
  if (alpha != 1.0f) check(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha), "output scale alpha");
  if (beta != 0.0f) {
    dnnl_post_ops_t po = nullptr;
    check(dnnl_post_ops_create(&po), "post ops");
    const dnnl_status_t st = dnnl_post_ops_append_sum(po, beta);
    if (st == dnnl_success) check(dnnl_primitive_attr_set_post_ops(attr, po), "sum post-op beta");
    dnnl_post_ops_destroy(po);
    check(st, "sum post-op beta");
  }
  dnnl_primitive_desc_t pd = nullptr;
  check(dnnl_primitive_desc_create(&pd, &desc, attr, cpu_engine(), nullptr), "bf16 matmul primitive descriptor");
  std::unique_ptr<dnnl_primitive_desc, decltype(&dnnl_primitive_desc_destroy)> pd_owner(
      pd, &dnnl_primitive_desc_destroy);
  const char* impl = nullptr;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) mm->impl = impl;
  check(dnnl_primitive_create(&mm->prim, pd), "bf16 matmul primitive");
  check(dnnl_memory_create(&mm->a, &a_md, cpu_engine(), DNNL_MEMORY_NONE), "memory A");
  check(dnnl_memory_create(&mm->b, &b_md, cpu_engine(), DNNL_MEMORY_NONE), "memory B");
  check(dnnl_memory_create(&mm->c, &c_md, cpu_engine(), DNNL_MEMORY_NONE), "memory C");
  return mm;
}

// This thread's primitive for the key, made at its first use.
Matmul& cached_matmul(bool trans_a, bool trans_b, int m, int n, int k, int ldc, float alpha, float beta,
                      int batch = 1, int64_t stride_c = 0) {
  detail::onednn_threads_for(m, n, k);
  thread_local std::map<MatmulKey, std::unique_ptr<Matmul>> cache;
  if (batch == 1) stride_c = int64_t(m) * ldc;
  const MatmulKey key{trans_a, trans_b, m, n, k, ldc, alpha, beta, gemm_engine_threads(GemmEngine::onednn), batch,
                      stride_c};
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, make_matmul(trans_a, trans_b, m, n, k, ldc, alpha, beta, batch, stride_c)).first;
  return *it->second;
}

dnnl_stream_t thread_stream() {
  struct Owner {
    dnnl_stream_t s = nullptr;
    ~Owner() {
      if (s) dnnl_stream_destroy(s);
    }
  };
  thread_local Owner owner;
  if (!owner.s) check(dnnl_stream_create(&owner.s, cpu_engine(), dnnl_stream_default_flags), "stream");
  return owner.s;
}

void execute(Matmul& mm, const uint16_t* a, const uint16_t* b, float* c) {
  check(dnnl_memory_set_data_handle(mm.a, const_cast<uint16_t*>(a)), "set A");
  check(dnnl_memory_set_data_handle(mm.b, const_cast<uint16_t*>(b)), "set B");
  check(dnnl_memory_set_data_handle(mm.c, c), "set C");
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, mm.a}, {DNNL_ARG_WEIGHTS, mm.b}, {DNNL_ARG_DST, mm.c}};
  dnnl_stream_t s = thread_stream();
  check(dnnl_primitive_execute(mm.prim, s, 3, args), "bf16 matmul");
  check(dnnl_stream_wait(s), "stream wait");
}

// `batch` products at element strides: each member's operands converted to dense bf16,
// one after another, then one oneDNN matmul over all of them (a 3-D matmul lets oneDNN
// pick its brgemm kernels for products too small to pay for a call each).
void native_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                 int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c, int ldc,
                 int64_t stride_c, int batch) {
  // Members side by side in C's rows (attention's output, dV, dQ, dK): oneDNN 2.6 runs a
  // 3-D matmul with such a destination on its gemm:jit path, not brgemm/AMX; a dense
  // [batch, m, n] result scattered after costs one pass over C and takes the AMX kernel.
  const bool side_by_side = batch > 1 && stride_c < int64_t(m) * ldc;
  thread_local std::vector<float> dense_c;
  float* out = c;
  if (side_by_side) {
    dense_c.resize(size_t(batch) * m * n);
    out = dense_c.data();
  }
  Matmul& mm = side_by_side ? cached_matmul(trans_a, trans_b, m, n, k, n, alpha, 0.0f, batch, int64_t(m) * n)
                            : cached_matmul(trans_a, trans_b, m, n, k, ldc, alpha, beta, batch, stride_c);
  thread_local std::vector<uint16_t> ha, hb;
  const Stored sa = stored_a(trans_a, m, k), sb = stored_b(trans_b, k, n);
  const size_t na = size_t(sa.rows) * sa.cols, nb = size_t(sb.rows) * sb.cols;
  ha.resize(na * size_t(batch));
  hb.resize(nb * size_t(batch));
  if (batch == 1) {
    convert_dense(a, sa.rows, sa.cols, lda, ha.data(), to_bf16_row_best);
    convert_dense(b, sb.rows, sb.cols, ldb, hb.data(), to_bf16_row_best);
  } else {  // every member's rows, as one parallel loop
    // (Pointers, not the thread_local vectors: parallel_for's threads have their own.)
    uint16_t* const da = ha.data();
    uint16_t* const db = hb.data();
    const int64_t rows = int64_t(batch) * (sa.rows + sb.rows);
    auto body = [=](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = r / (sa.rows + sb.rows), j = r % (sa.rows + sb.rows);
        if (j < sa.rows)
          to_bf16_row_best(a + i * stride_a + j * lda, da + size_t(i) * na + size_t(j) * sa.cols, sa.cols);
        else
          to_bf16_row_best(b + i * stride_b + (j - sa.rows) * ldb, db + size_t(i) * nb + size_t(j - sa.rows) * sb.cols,
                           sb.cols);
      }
    };
    if (int64_t(batch) * int64_t(na + nb) < (int64_t{1} << 16)) body(0, rows);
    else parallel_for(rows, parallel_grain(std::max(sa.cols, sb.cols)), body);
  }
  execute(mm, ha.data(), hb.data(), out);
  if (!side_by_side) return;
  const float* src = dense_c.data();
  auto scatter = [=](int64_t r0, int64_t r1) {  // row r of member i = r / m
    for (int64_t r = r0; r < r1; ++r) {
      const float* from = src + r * n;
      float* to = c + (r / m) * stride_c + (r % m) * ldc;
      if (beta == 0.0f) std::memcpy(to, from, size_t(n) * sizeof(float));
      else
        for (int j = 0; j < n; ++j) to[j] = beta * to[j] + from[j];
    }
  };
  if (int64_t(batch) * m * n < (int64_t{1} << 16)) scatter(0, int64_t(batch) * m);
  else parallel_for(int64_t(batch) * m, parallel_grain(n), scatter);
}
#endif

struct NativeInfo {
  bool native = false;
  std::string what;  // native: the implementation; else why not
};

NativeInfo probe_native() {
#ifndef DPT_HAVE_ONEDNN
  return {false, "this build has no oneDNN (install libdnnl-dev, reconfigure)"};
#else
  const CpuFeatures& f = cpu_features();
  if (!f.amx_bf16 && !f.avx512_bf16)
    return {false, std::string("this CPU has neither AMX-BF16 nor AVX512-BF16") +
                       (max_cpu_isa() < CpuIsa::amx ? std::string(" at ") + kMaxCpuIsaVar + "=" +
                                                          cpu_isa_name(max_cpu_isa())
                                                    : "")};
  const int isa = onednn_cpu_isa();
  if ((isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16)
    return {false, "oneDNN " + onednn_version() + " runs " + onednn_isa_name() +
                       ", below avx512_core_bf16 (ONEDNN_MAX_CPU_ISA?)"};
  try {
    // The step's typical product; oneDNN picks the same kernel family for every shape.
    const Matmul& mm = cached_matmul(false, false, 256, 768, 768, 768, 1.0f, 0.0f);
    if (mm.impl.rfind("ref", 0) == 0)
      return {false, "oneDNN " + onednn_version() + "'s bf16 matmul here is its reference code (" + mm.impl + ")"};
    return {true, "oneDNN " + onednn_version() + " matmul " + mm.impl};
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
#endif
}

const NativeInfo& native_info() {
  static const NativeInfo info = probe_native();
  return info;
}

}  // namespace

bool bf16_gemm_native() { return native_info().native; }

std::string bf16_gemm_description() {
  const NativeInfo& i = native_info();
  if (i.native) return "bf16 GEMM: native, " + i.what + " (bf16 operands, fp32 accumulation and output)";
  return "bf16 GEMM: not native (" + i.what +
         "): --precision bf16 keeps fp32 GEMMs on bf16-rounded weights (emulation)";
}

std::string gemm_bf16_impl(bool trans_a, bool trans_b, int m, int n, int k, int ldc, float alpha, float beta) {
#ifdef DPT_HAVE_ONEDNN
  if (bf16_gemm_native() && m > 0 && n > 0 && k > 0)
    return cached_matmul(trans_a, trans_b, m, n, k, ldc, alpha, beta).impl;
#else
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)ldc, (void)alpha, (void)beta;
#endif
  return "";
}

void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  const Stored sa = stored_a(trans_a, m, k), sb = stored_b(trans_b, k, n);
  if (lda < sa.cols || ldb < sb.cols || ldc < n)
    throw std::invalid_argument("gemm_bf16: leading dimension below the row length (lda " + std::to_string(lda) +
                                ", ldb " + std::to_string(ldb) + ", ldc " + std::to_string(ldc) + ")");
#ifdef DPT_HAVE_ONEDNN
  if (bf16_gemm_native())
    return native_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
#endif
  emulated_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_bf16_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                       int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c, int ldc,
                       int64_t stride_c, int batch) {
  if (batch < 0) throw std::invalid_argument("gemm_bf16_batched: batch " + std::to_string(batch) + " < 0");
#ifdef DPT_HAVE_ONEDNN
  const Stored sa = stored_a(trans_a, m, k), sb = stored_b(trans_b, k, n);
  // The one-call path needs a real product and C's members apart: one after another
  // (attention's scores, a T x T block per head) or side by side within C's rows (its
  // output, head h in columns h*hd ... of every row).
  const bool apart = stride_c >= int64_t(m) * ldc || (stride_c >= n && int64_t(batch - 1) * stride_c + n <= ldc);
  if (bf16_gemm_native() && batch > 1 && m > 0 && n > 0 && k > 0 && lda >= sa.cols && ldb >= sb.cols && ldc >= n &&
      apart)
    return native_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                       batch);
#endif
  for (int i = 0; i < batch; ++i)
    gemm_bf16(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c,
              ldc);
}

void to_bf16(const float* src, uint16_t* dst, int64_t n) {
  constexpr int64_t kRow = int64_t{1} << 30;  // the row converters take int lengths
  for (int64_t i = 0; i < n; i += kRow) to_bf16_row_best(src + i, dst + i, int(std::min(kRow, n - i)));
}

const uint16_t* Bf16Copy::convert(const float* src, int64_t n) {
  v_.resize(static_cast<size_t>(n));
  uint16_t* dst = v_.data();
  if (n < (int64_t{1} << 16)) {
    to_bf16(src, dst, n);
  } else {
    parallel_for(n, int64_t{1} << 15, [&](int64_t first, int64_t last) { to_bf16(src + first, dst + first, last - first); });
  }
  return dst;
}

void gemm_bf16_operands(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a,
                        const uint16_t* b, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  if (ldc < n)
    throw std::invalid_argument("gemm_bf16_operands: ldc " + std::to_string(ldc) + " below n " + std::to_string(n));
  const Stored sa = stored_a(trans_a, m, k), sb = stored_b(trans_b, k, n);
#ifdef DPT_HAVE_ONEDNN
  if (bf16_gemm_native()) return execute(cached_matmul(trans_a, trans_b, m, n, k, ldc, alpha, beta), a, b, c);
#endif
  thread_local std::vector<float> wa, wb;
  wa.resize(size_t(sa.rows) * sa.cols);
  wb.resize(size_t(sb.rows) * sb.cols);
  for (size_t i = 0; i < wa.size(); ++i) wa[i] = bf16_value(a[i]);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = bf16_value(b[i]);
  sgemm_with(gemm_engine(), trans_a, trans_b, m, n, k, alpha, wa.data(), sa.cols, wb.data(), sb.cols, beta, c, ldc);
}

}  // namespace dpt
