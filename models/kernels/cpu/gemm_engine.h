// The CPU GEMM engines behind sgemm() (models/kernels/cpu/gemm.h), each called the same way:
// C = alpha * op(A) * op(B) + beta * C on row-major float matrices. No policy here: which
// engine sgemm() runs is models/kernels/cpu/gemm_choice.h's business.
//
// Terms:
//   openblas  cblas_sgemm from OpenBLAS. Debian's build picks its kernels at load time
//             from the CPU's family/model numbers (its "core", e.g. SkylakeX); a model
//             number it does not know gets the Prescott (SSE3) kernels, ~4x slower on an
//             AVX-512 CPU. OPENBLAS_CORETYPE overrides the core (benchmarks only).
//   onednn    dnnl_sgemm from oneDNN (Debian: libdnnl-dev), built with DPT_HAVE_ONEDNN.
//             It JITs its kernels for the instruction sets CPUID reports (its "ISA",
//             e.g. avx512_core_amx), so it cannot mistake a new CPU for an old one;
//             DPT_MAX_CPU_ISA caps it as it caps our kernels (cap_onednn_isa), or
//             ONEDNN_MAX_CPU_ISA where that is set.
//   mkl       cblas_sgemm from Intel oneMKL (PyPI's mkl wheel, pinned in
//             tools/python-requirements.txt), optional: CMake passes the path of the
//             environment's libmkl_rt.so.3, and the first use dlopens it (RTLD_LOCAL, so its
//             cblas_* never resolve against OpenBLAS's or the reverse). Without the file, or
//             where it does not load, the engine is unavailable and says why
//             (gemm_engine_unavailable_reason). Threading layer GNU (libgomp, oneDNN's runtime,
//             one OpenMP pool in the process), LP64 integers; MKL dispatches on CPUID itself.
//   threads   every engine runs a product on blas_threads() threads (the process's thread
//             plan, models/kernels/cpu/gemm.h), and products of at most 64^3 multiply-adds on one (OpenBLAS's
//             own rule). oneDNN's CPU runtime in Debian is OpenMP (libgomp): before each
//             call the calling thread's OpenMP thread count is set accordingly, so
//             OPENBLAS_NUM_THREADS=1 keeps both single-threaded (OMP_NUM_THREADS is
//             overridden). mkl: MKL's thread-local count (mkl_set_num_threads_local) is
//             set the same way before each call, 1 for products of at most 64^3.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpt {

enum class GemmEngine { openblas, onednn, mkl };

const char* gemm_engine_name(GemmEngine e);
// "openblas" / "onednn" / "mkl"; nullopt for anything else ("auto" is gemm_choice.h's).
std::optional<GemmEngine> parse_gemm_engine(std::string_view name);
bool gemm_engine_available(GemmEngine e);      // onednn: only in builds with oneDNN; mkl: where it loads
// Why e is unavailable ("" when it is available), e.g. "libmkl_rt.so.3 did not load: ...".
std::string gemm_engine_unavailable_reason(GemmEngine e);
std::vector<GemmEngine> available_gemm_engines();

// One product on engine `e`: no recording, no choice (throws std::invalid_argument when
// `e` is not in this build, std::runtime_error when the engine rejects the arguments).
// m, n == 0 return at once; k == 0 scales C by beta.
void sgemm_with(GemmEngine e, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc);

// What each engine runs on this CPU:
std::string openblas_core_name();  // openblas_get_corename(): "SkylakeX", "Prescott", ...
int onednn_cpu_isa();              // dnnl_get_effective_cpu_isa() (a dnnl_cpu_isa_t); -1 without oneDNN
std::string onednn_isa_name();     // "avx512_core_amx", ...; "" without oneDNN
std::string onednn_version();      // "2.6.3"; "" without oneDNN
std::string mkl_version();         // mkl_get_version_string(): "Intel(R) oneAPI Math Kernel Library Version
                                   // 2026.2 ..."; "" where mkl is unavailable
// MKL's cblas_gemm_bf16bf16f32 (bf16 operands as their 16 bits, fp32 C), for the
// benchmark's bf16 comparison only (no engine runs it): false where mkl is unavailable or
// lacks the function, else runs the product (threads as sgemm_with(mkl)) and returns true
// (m or n == 0: calls nothing, so it only says whether the function is there).
bool mkl_gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const unsigned short* a, int lda,
                   const unsigned short* b, int ldb, float beta, float* c, int ldc);
// DPT_MAX_CPU_ISA (device/cpu_isa.h) given to oneDNN as its own cap (dnnl_set_max_cpu_isa),
// unless ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA is set (oneDNN then reads that). oneDNN
// takes a cap only before its first use, so every caller of oneDNN calls this first (once
// per process; std::runtime_error where oneDNN was used before). No-op without oneDNN.
void cap_onednn_isa();
// Threads engine e runs a product on when called from this thread: blas_threads() for
// openblas and mkl; for onednn this thread's OpenMP thread count, which every sgemm_with(onednn)
// sets first (blas_threads(), or 1 for a product of at most 64^3; tests read it after a
// call).
int gemm_engine_threads(GemmEngine e);

}  // namespace dpt
