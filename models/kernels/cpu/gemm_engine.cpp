#include "models/kernels/cpu/gemm_engine.h"

#include <cblas.h>  // cblas_sgemm, openblas_get_corename
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "device/cpu_isa.h"
#include "models/kernels/cpu/gemm.h"

#ifdef DPT_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef DPT_ONEDNN_OPENMP
// The OpenMP runtime oneDNN was built with (Debian: libgomp.so.1, linked by
// models/CMakeLists.txt); declared here so no OpenMP compiler flag or header is needed.
extern "C" {
void omp_set_num_threads(int n);
int omp_get_max_threads(void);
}
#endif

namespace dpt {
namespace {

void scale_c(int m, int n, float beta, float* c, int ldc) {
  for (int i = 0; i < m; ++i) {
    float* row = c + static_cast<size_t>(i) * ldc;
    for (int j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
  }
}

// Products of at most kSerialMnk = 64^3 multiply-adds run on one thread, as OpenBLAS
// 0.3.21 runs them (SMP_THRESHOLD_MIN 65536 x GEMM_MULTITHREAD_THRESHOLD 4): oneDNN and
// MKL would split even those, and an OpenMP fork/join per call costs more than it saves
// there. On a busy machine it costs far more: attention's 64x64x64 products measured 0.1
// GFLOP/s on 2 threads while another job held the second core, against ~110 on one (oneDNN,
// and MKL again: 0.1 against ~95).
constexpr double kSerialMnk = 64.0 * 64.0 * 64.0;

#ifdef DPT_HAVE_ONEDNN
// oneDNN's OpenMP team size is a per-thread setting (each thread that calls in starts
// with OMP_NUM_THREADS or the cores): set it on every call, from whichever thread.

void follow_blas_threads(int m, int n, int k) {
#ifdef DPT_ONEDNN_OPENMP
  const int want = double(m) * n * k <= kSerialMnk ? 1 : blas_threads();
  if (omp_get_max_threads() != want) omp_set_num_threads(want);
#else
  (void)m, (void)n, (void)k;
#endif
}

void onednn_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                  const float* b, int ldb, float beta, float* c, int ldc) {
  cap_onednn_isa();
  follow_blas_threads(m, n, k);
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                      beta, c, ldc);
  if (st != dnnl_success)
    throw std::runtime_error("dnnl_sgemm(" + std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + ", m=" +
                             std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                             " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) + " ldc=" +
                             std::to_string(ldc) + ") failed with status " + std::to_string(int(st)));
}
#endif

// Intel oneMKL through its single dynamic library, loaded once on first use. Only the
// handle's own symbols are called (dlsym on it), so nothing here can bind to OpenBLAS's
// cblas_sgemm or MKL's to ours. The CBLAS enum values (row-major 101, N 111, T 112) are
// the standard's, the same in OpenBLAS's cblas.h included above and in MKL's.
struct Mkl {
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);
  using GemmBf16 = void (*)(int, int, int, int, int, int, float, const unsigned short*, int, const unsigned short*,
                            int, float, float*, int);
  Sgemm sgemm = nullptr;
  GemmBf16 gemm_bf16 = nullptr;  // absent in older MKLs: only the benchmark asks
  int (*set_threads_local)(int) = nullptr;
  void (*version_string)(char*, int) = nullptr;
  std::string error;  // why it is unavailable; "" when loaded
};

const Mkl& mkl() {
  static const Mkl lib = [] {
    Mkl m;
#ifdef DPT_MKL_RT_PATH
    void* h = ::dlopen(DPT_MKL_RT_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = ::dlerror();
      m.error = std::string(DPT_MKL_RT_PATH) + " did not load: " + (why ? why : "dlopen failed");
      return m;
    }
    auto sym = [&](const char* name) {
      void* p = ::dlsym(h, name);
      if (!p && m.error.empty()) m.error = std::string(DPT_MKL_RT_PATH) + " lacks " + name;
      return p;
    };
    auto set_layer = reinterpret_cast<int (*)(int)>(sym("MKL_Set_Threading_Layer"));
    auto set_interface = reinterpret_cast<int (*)(int)>(sym("MKL_Set_Interface_Layer"));
    m.sgemm = reinterpret_cast<Mkl::Sgemm>(sym("cblas_sgemm"));
    m.set_threads_local = reinterpret_cast<int (*)(int)>(sym("MKL_Set_Num_Threads_Local"));
    m.version_string = reinterpret_cast<void (*)(char*, int)>(sym("MKL_Get_Version_String"));
    if (!m.error.empty()) return m;
    m.gemm_bf16 = reinterpret_cast<Mkl::GemmBf16>(::dlsym(h, "cblas_gemm_bf16bf16f32"));
    // Before the first call, or MKL reads MKL_INTERFACE_LAYER / MKL_THREADING_LAYER:
    // 32-bit integers (LP64, 0), as declared above. Threading layer GNU (3): MKL's threads
    // are libgomp's, the runtime oneDNN already runs in this process, so the two engines
    // share one OpenMP pool instead of two spinning against each other; Intel's own
    // (libiomp5, MKL's default) would be a second OpenMP runtime. Not SEQUENTIAL (1): the
    // layer is fixed for the process while blas_threads() may change, and at one thread
    // GNU measured the same as SEQUENTIAL (2-core Xeon, 1 thread: 64^3 76 vs 77,
    // 256x768x768 85 vs 85 GFLOP/s) except on 16^3 products (21 vs 25). Without libgomp in
    // the build (no oneDNN on OpenMP) MKL's GNU layer has no runtime to bind: SEQUENTIAL.
#ifdef DPT_ONEDNN_OPENMP
    constexpr int kLayer = 3, kNoLayer = -1;
#else
    constexpr int kLayer = 1, kNoLayer = -1;
#endif
    if (set_interface(0) < 0 || set_layer(kLayer) == kNoLayer) {
      m.error = std::string(DPT_MKL_RT_PATH) + " refused its LP64 interface or threading layer";
      m.sgemm = nullptr;
    }
#else
    m.error = "this build found no libmkl_rt (pip install mkl-devel into .venv, reconfigure)";
#endif
    return m;
  }();
  return lib;
}

// MKL's thread count for this thread's next product (a per-thread setting): blas_threads(),
// or 1 for a product of at most kSerialMnk, as oneDNN's.
void mkl_threads(int m, int n, int k) {
  static thread_local int set = 0;
  const int want = double(m) * n * k <= kSerialMnk ? 1 : blas_threads();
  if (set != want) mkl().set_threads_local(want), set = want;
}

void mkl_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  const Mkl& lib = mkl();
  if (!lib.sgemm) throw std::invalid_argument("GEMM engine mkl: unavailable: " + lib.error);
  mkl_threads(m, n, k);
  lib.sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
            a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

#ifdef DPT_HAVE_ONEDNN
namespace detail {
// For models/kernels/cpu/gemm_bf16.cpp: oneDNN's thread count for one product, as onednn_sgemm sets it.
void onednn_threads_for(int m, int n, int k) { follow_blas_threads(m, n, k); }
}  // namespace detail
#endif

const char* gemm_engine_name(GemmEngine e) {
  switch (e) {
    case GemmEngine::openblas: return "openblas";
    case GemmEngine::onednn: return "onednn";
    case GemmEngine::mkl: return "mkl";
  }
  return "?";
}

std::optional<GemmEngine> parse_gemm_engine(std::string_view name) {
  if (name == "openblas") return GemmEngine::openblas;
  if (name == "onednn") return GemmEngine::onednn;
  if (name == "mkl") return GemmEngine::mkl;
  return std::nullopt;
}

bool gemm_engine_available(GemmEngine e) { return gemm_engine_unavailable_reason(e).empty(); }

std::string gemm_engine_unavailable_reason(GemmEngine e) {
  switch (e) {
    case GemmEngine::openblas: return "";
    case GemmEngine::onednn:
#ifdef DPT_HAVE_ONEDNN
      return "";
#else
      return "this build has no oneDNN (install libdnnl-dev and reconfigure)";
#endif
    case GemmEngine::mkl: return mkl().error;
  }
  return "unknown engine";
}

std::vector<GemmEngine> available_gemm_engines() {
  std::vector<GemmEngine> v{GemmEngine::openblas};
  for (GemmEngine e : {GemmEngine::onednn, GemmEngine::mkl})
    if (gemm_engine_available(e)) v.push_back(e);
  return v;
}

void sgemm_with(GemmEngine e, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  // Both libraries would accept k == 0, but not every version alike; BLAS says C = beta*C
  // (and beta == 0 does not read C).
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  if (e == GemmEngine::onednn) {
#ifdef DPT_HAVE_ONEDNN
    return onednn_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
    throw std::invalid_argument("GEMM engine onednn: this build has no oneDNN (install libdnnl-dev, reconfigure)");
#endif
  }
  if (e == GemmEngine::mkl) return mkl_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string openblas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "";
}

void cap_onednn_isa() {
#ifdef DPT_HAVE_ONEDNN
  static const bool applied = [] {
    const CpuIsa cap = max_cpu_isa();
    if (cap == CpuIsa::amx || std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA")) return true;
    static constexpr dnnl_cpu_isa_t kOnednn[] = {dnnl_cpu_isa_sse41, dnnl_cpu_isa_avx, dnnl_cpu_isa_avx2,
                                                 dnnl_cpu_isa_avx512_core, dnnl_cpu_isa_avx512_core_bf16};
    const dnnl_status_t st = dnnl_set_max_cpu_isa(kOnednn[static_cast<int>(cap)]);
    if (st != dnnl_success)
      throw std::runtime_error(std::string(kMaxCpuIsaVar) + "=" + cpu_isa_name(cap) + ": oneDNN " +
                               (st == dnnl_unimplemented ? "was built without CPU ISA caps (DNNL_ENABLE_MAX_CPU_ISA)"
                                                         : "was used before its cap could be set (a call into it "
                                                           "that does not start with cap_onednn_isa())"));
    return true;
  }();
  (void)applied;
#endif
}

int onednn_cpu_isa() {
#ifdef DPT_HAVE_ONEDNN
  cap_onednn_isa();
  return static_cast<int>(dnnl_get_effective_cpu_isa());
#else
  return -1;
#endif
}

std::string onednn_isa_name() {
#ifdef DPT_HAVE_ONEDNN
  cap_onednn_isa();
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_all: return "all";
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
  }
  return "isa 0x" + [] {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%x", unsigned(dnnl_get_effective_cpu_isa()));
    return std::string(buf);
  }();
#else
  return "";
#endif
}

std::string onednn_version() {
#ifdef DPT_HAVE_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
#else
  return "";
#endif
}

std::string mkl_version() {
  const Mkl& lib = mkl();
  if (!lib.sgemm) return "";
  char buf[256] = {};
  lib.version_string(buf, int(sizeof buf) - 1);
  std::string v(buf);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

bool mkl_gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const unsigned short* a, int lda,
                   const unsigned short* b, int ldb, float beta, float* c, int ldc) {
  const Mkl& lib = mkl();
  if (!lib.sgemm || !lib.gemm_bf16) return false;
  if (m == 0 || n == 0) return true;  // nothing to do: only whether it is there
  mkl_threads(m, n, k);
  lib.gemm_bf16(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
  return true;
}

int gemm_engine_threads(GemmEngine e) {
#ifdef DPT_ONEDNN_OPENMP
  if (e == GemmEngine::onednn) return omp_get_max_threads();
#else
  (void)e;
#endif
  return blas_threads();
}

}  // namespace dpt
