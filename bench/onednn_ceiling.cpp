#include "bench/onednn_ceiling.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "models/kernels/cpu/gemm_engine.h"

#ifdef DPT_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#ifdef DPT_ONEDNN_OPENMP
extern "C" void omp_set_num_threads(int n);  // libgomp, oneDNN's CPU runtime in Debian
#endif
#endif

namespace dpt::bench {

#ifndef DPT_HAVE_ONEDNN
bool onednn_ceiling_available() { return false; }
CeilingResult onednn_matmul_ceiling(const CeilingShape&, bool, bool, int, double) {
  return {0, "this build has no oneDNN"};
}
#else
namespace {

using Clock = std::chrono::steady_clock;

void check(dnnl_status_t st, const char* what) {
  if (st != dnnl_success) throw std::runtime_error(std::string(what) + ": oneDNN status " + std::to_string(int(st)));
}

// Owners for the C API's handles, so an exception on the way leaks nothing.
template <class T, dnnl_status_t (*Destroy)(T)>
struct Handle {
  T h = nullptr;
  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (h) Destroy(h);
  }
};
using Memory = Handle<dnnl_memory_t, dnnl_memory_destroy>;
using Primitive = Handle<dnnl_primitive_t, dnnl_primitive_destroy>;
using PrimitiveDesc = Handle<dnnl_primitive_desc_t, dnnl_primitive_desc_destroy>;
using Attr = Handle<dnnl_primitive_attr_t, dnnl_primitive_attr_destroy>;
using PostOps = Handle<dnnl_post_ops_t, dnnl_post_ops_destroy>;

dnnl_engine_t engine() {
  static dnnl_engine_t e = [] {
    cap_onednn_isa();  // DPT_MAX_CPU_ISA, as for the engines it is compared with
    dnnl_engine_t made = nullptr;
    check(dnnl_engine_create(&made, dnnl_cpu, 0), "engine");
    return made;
  }();
  return e;
}

dnnl_stream_t stream() {
  static dnnl_stream_t s = [] {
    dnnl_stream_t made = nullptr;
    check(dnnl_stream_create(&made, engine(), dnnl_stream_default_flags), "stream");
    return made;
  }();
  return s;
}

uint16_t bf16_of(float f) {  // exact for the small constants used here (truncation)
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return uint16_t(u >> 16);
}

}  // namespace

bool onednn_ceiling_available() { return true; }

CeilingResult onednn_matmul_ceiling(const CeilingShape& s, bool bf16, bool packed, int threads, double seconds) {
  CeilingResult r;
#ifdef DPT_ONEDNN_OPENMP
  omp_set_num_threads(double(s.m) * s.n * s.k <= 64.0 * 64.0 * 64.0 ? 1 : std::max(1, threads));
#else
  (void)threads;
#endif
  const dnnl_data_type_t dt = bf16 ? dnnl_bf16 : dnnl_f32;
  dnnl_dims_t a_dims = {s.m, s.k}, b_dims = {s.k, s.n}, c_dims = {s.m, s.n};
  dnnl_dims_t a_strides = {s.trans_a ? 1 : s.lda, s.trans_a ? s.lda : 1};
  dnnl_dims_t b_strides = {s.trans_b ? 1 : s.ldb, s.trans_b ? s.ldb : 1};
  dnnl_dims_t c_strides = {s.ldc, 1};
  dnnl_memory_desc_t a_md, b_md, b_want, c_md;
  check(dnnl_memory_desc_init_by_strides(&a_md, 2, a_dims, dt, a_strides), "memory desc A");
  check(dnnl_memory_desc_init_by_strides(&b_md, 2, b_dims, dt, b_strides), "memory desc B");
  check(dnnl_memory_desc_init_by_strides(&c_md, 2, c_dims, dnnl_f32, c_strides), "memory desc C");
  if (packed) check(dnnl_memory_desc_init_by_tag(&b_want, 2, b_dims, dt, dnnl_format_tag_any), "memory desc B any");
  else b_want = b_md;

  dnnl_matmul_desc_t desc;
  check(dnnl_matmul_desc_init(&desc, &a_md, &b_want, nullptr, &c_md), "matmul desc");
  Attr attr;
  check(dnnl_primitive_attr_create(&attr.h), "attr");
  if (s.accumulate) {
    PostOps po;
    check(dnnl_post_ops_create(&po.h), "post ops");
    check(dnnl_post_ops_append_sum(po.h, 1.0f), "sum post-op");
    check(dnnl_primitive_attr_set_post_ops(attr.h, po.h), "set post ops");
  }
  PrimitiveDesc pd;
  if (dnnl_primitive_desc_create(&pd.h, &desc, attr.h, engine(), nullptr) != dnnl_success) {
    r.impl = "no matmul primitive for this shape";
    return r;
  }
  const char* impl = nullptr;
  if (dnnl_primitive_desc_query(pd.h, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) r.impl = impl;
  Primitive prim;
  check(dnnl_primitive_create(&prim.h, pd.h), "matmul primitive");

  // Stored operands (rows x ld), small values that stay normal in every product.
  const size_t elt = bf16 ? 2 : 4;
  const size_t a_rows = size_t(s.trans_a ? s.k : s.m), b_rows = size_t(s.trans_b ? s.n : s.k);
  std::vector<unsigned char> a(a_rows * size_t(s.lda) * elt), b(b_rows * size_t(s.ldb) * elt);
  std::vector<float> c(size_t(s.m) * size_t(s.ldc), 0.0f);
  auto fill = [&](std::vector<unsigned char>& v, float x) {
    if (bf16) {
      const uint16_t bits = bf16_of(x);
      for (size_t i = 0; i + 1 < v.size(); i += 2) std::memcpy(&v[i], &bits, 2);
    } else {
      for (size_t i = 0; i + 3 < v.size(); i += 4) std::memcpy(&v[i], &x, 4);
    }
  };
  fill(a, 0.01f);
  fill(b, 0.02f);
  Memory ma, mb, mb_packed, mc;
  check(dnnl_memory_create(&ma.h, &a_md, engine(), a.data()), "memory A");
  check(dnnl_memory_create(&mb.h, &b_md, engine(), b.data()), "memory B");
  check(dnnl_memory_create(&mc.h, &c_md, engine(), c.data()), "memory C");
  dnnl_memory_t weights = mb.h;
  if (packed) {  // once, outside the timing: a framework packs its weights once per update
    const dnnl_memory_desc_t* want = dnnl_primitive_desc_query_md(pd.h, dnnl_query_weights_md, 0);
    check(dnnl_memory_create(&mb_packed.h, want, engine(), DNNL_MEMORY_ALLOCATE), "memory B packed");
    PrimitiveDesc rpd;
    check(dnnl_reorder_primitive_desc_create(&rpd.h, &b_md, engine(), want, engine(), nullptr), "reorder desc");
    Primitive reorder;
    check(dnnl_primitive_create(&reorder.h, rpd.h), "reorder");
    dnnl_exec_arg_t rargs[2] = {{DNNL_ARG_FROM, mb.h}, {DNNL_ARG_TO, mb_packed.h}};
    check(dnnl_primitive_execute(reorder.h, stream(), 2, rargs), "reorder B");
    check(dnnl_stream_wait(stream()), "stream wait");
    weights = mb_packed.h;
  }
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma.h}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, mc.h}};
  auto once = [&] {
    check(dnnl_primitive_execute(prim.h, stream(), 3, args), "matmul");
    check(dnnl_stream_wait(stream()), "stream wait");
  };
  once();  // warm-up: threads, pages, caches
  auto t0 = Clock::now();
  once();
  const double first = std::chrono::duration<double>(Clock::now() - t0).count();
  const int reps = std::clamp(int(0.01 / std::max(first, 1e-7)), 1, 10000);
  const auto start = Clock::now();
  for (int round = 0;; ++round) {
    t0 = Clock::now();
    for (int i = 0; i < reps; ++i) once();
    const double t = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
    if (r.seconds == 0 || t < r.seconds) r.seconds = t;
    if (round >= 2 && std::chrono::duration<double>(Clock::now() - start).count() >= seconds) break;
  }
  return r;
}
#endif

}  // namespace dpt::bench
