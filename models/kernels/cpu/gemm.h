// sgemm: C = alpha * op(A) * op(B) + beta * C, row-major, on the CPU GEMM engine chosen
// once per process (models/kernels/cpu/gemm_choice.h: DPT_GEMM=openblas|onednn|auto; the engines
// are models/kernels/cpu/gemm_engine.h). Every matrix product in models/ goes through here, so one
// place can count them: a GemmRecorder installed on the calling thread records each
// call's shape (m, n, k, transposes, leading dimensions). The trainer uses that record to
// compute model FLOPs (2*m*n*k per call) and to benchmark raw sgemm on exactly the
// shapes the model runs.
#pragma once

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "models/kernels/cpu/gemm_choice.h"

namespace dpt {

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
           int lda, const float* b, int ldb, float beta, float* c, int ldc);
// The same product on device pointers (cuBLAS, gpu::sgemm) when `cuda`, else sgemm();
// recorded alike. sgemm_batched_on: `batch` products at fixed element strides, equal to
// sgemm() on each member (on the CPU at bf16 precision where bf16_gemm_native(), one
// gemm_bf16_batched call; elsewhere sgemm() on each member in turn, fp32 where bf16 is not
// native, as sgemm() is).
void sgemm_on(bool cuda, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              int lda, const float* b, int ldb, float beta, float* c, int ldc);
void sgemm_batched_on(bool cuda, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                      int lda, int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c,
                      int ldc, int64_t stride_c, int batch);

// bf16 products (issue 27 item 3, "bf16 on the CPU for real"): C = alpha * op(A) * op(B) +
// beta * C with A and B rounded to bf16 (round to nearest even), the products and their
// sums in fp32 (as CPU autocast runs a matmul: fp32 master weights, bf16 operands, fp32
// accumulation and output). Same arguments as sgemm: row-major fp32 A, B and C, any
// transposes and leading dimensions, any alpha and beta.
//   native    oneDNN's matmul primitive (bf16 src/weights, f32 dst; output scale alpha,
//             sum post-op beta), which runs on AMX or AVX512-BF16; one primitive per
//             shape, transposes, ldc, alpha, beta and thread count, created once per
//             thread and kept (creation costs far more than a product). The operands are
//             converted into per-thread dense bf16 buffers on every call.
//   emulated  elsewhere (no oneDNN in the build, or a CPU with neither AMX-BF16 nor
//             AVX512-BF16, or oneDNN capped below avx512_core_bf16): the operands rounded
//             to bf16 in fp32 buffers, then sgemm_with(gemm_engine()): the same numbers up
//             to the order of the fp32 sums, at fp32 speed or less.
// gemm_bf16 always works (native or emulated) and records nothing.
// f16 (--precision fp16 on CUDA): fp16 operands, fp32 accumulation on tensor cores
// (gpu::gemm_f16). The CPU has no fp16 product here: sgemm() runs fp32 under f16 (the
// fp16 emulation rounds activations and weights, models/kernels/cpu/f16_round.h, not products).
enum class GemmPrecision { f32, bf16, f16 };
const char* gemm_precision_name(GemmPrecision p);  // "fp32" / "bf16" / "fp16"
void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc);
// `batch` such products at element strides (member i: a + i*stride_a, b + i*stride_b,
// c + i*stride_c), as one oneDNN matmul where native and C's members do not overlap.
void gemm_bf16_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                       int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c, int ldc,
                       int64_t stride_c, int batch);
// Products on operands the caller converted to bf16 itself, for operands that several
// products share (a convolution's weights feed its forward and its backward-data product,
// its dY both backward products, and its im2col columns can be gathered as bf16 directly):
// each is converted once instead of once per product. A and B are dense bf16 bits (round
// to nearest even, models/kernels/cpu/bf16.h) in their stored layout: op(A) m x k is stored m x k, or
// k x m when transposed, with the stored row length as leading dimension; likewise B. C is
// fp32 with ldc. Native, the same oneDNN matmul as gemm_bf16 (identical results); elsewhere
// the operands widened back to fp32 and multiplied by the fp32 engine (the emulation).
// sgemm_bf16_operands records and times the call as sgemm() does (a bf16 GemmShape with
// lda/ldb the stored row lengths); gemm_bf16_operands records nothing.
void gemm_bf16_operands(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a,
                        const uint16_t* b, float beta, float* c, int ldc);
void sgemm_bf16_operands(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a,
                         const uint16_t* b, float beta, float* c, int ldc);
// True where gemm_bf16 is native (oneDNN bf16 matmul on AMX or AVX512-BF16, not its
// reference implementation): decided once, at the first call.
bool bf16_gemm_native();
// One line for programs to print, e.g. "bf16 GEMM: native, oneDNN 2.6.3 matmul
// brg:avx512_core_amx_bf16 (bf16 operands, fp32 accumulation)" or "bf16 GEMM: not native
// (this CPU has neither AMX-BF16 nor AVX512-BF16): --precision bf16 computes in fp32 with
// bf16-rounded weights (emulation)".
std::string bf16_gemm_description();
// Native bf16 products against fp32 ones (the engine sgemm() runs) on this CPU and thread
// count: fp32 time / bf16 time on a transformer step's product shapes, interleaved, best of 3
// rounds after a warm-up (about 0.1 s); 0 where bf16 is not native. bf16_speed_note: a line
// for programs to print at start, saying the ratio and, below 1, that bf16 is the slower
// choice here ("" where bf16 is not native: bf16_gemm_description says that).
double measure_bf16_speedup();
std::string bf16_speed_note();
// The oneDNN implementation gemm_bf16 runs for this product on this thread (e.g.
// "brg:avx512_core_amx_bf16"; "" when emulated): benchmarks and tests print it.
std::string gemm_bf16_impl(bool trans_a, bool trans_b, int m, int n, int k, int ldc, float alpha, float beta);

// The precision sgemm() runs on this thread. bf16 takes effect only where
// bf16_gemm_native(); elsewhere sgemm() stays fp32 (the emulation: the trainer's bf16
// working weights, fp32 arithmetic). Module sets it around forward and backward
// (Module::set_gemm_precision), so Linear, attention, the convolutions' im2col products
// and the tied LM head all follow it. CUDA products (sgemm_on with cuda) follow it too:
// bf16 runs gpu::gemm_bf16 and f16 gpu::gemm_f16 (cuBLASLt, tensor cores) on every GPU.
GemmPrecision gemm_precision();
class GemmPrecisionScope {
 public:
  explicit GemmPrecisionScope(GemmPrecision p);
  ~GemmPrecisionScope();
  GemmPrecisionScope(const GemmPrecisionScope&) = delete;
  GemmPrecisionScope& operator=(const GemmPrecisionScope&) = delete;

 private:
  GemmPrecision previous_;
};

// Threads every engine runs a product on: OpenBLAS's count (OPENBLAS_NUM_THREADS or
// OMP_NUM_THREADS, else every CPU) until a program applies its thread plan with
// set_blas_threads (train/cpu_threads_setup.h: the cores divided by the ranks on the
// host); set_blas_threads changes it for the whole process.
int blas_threads();
void set_blas_threads(int n);

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;  // beta != 0
  bool bf16 = false;        // bf16 operands (GemmPrecision::bf16 on a native CPU, or on CUDA)
  bool f16 = false;         // fp16 operands (GemmPrecision::f16 on CUDA)
  auto key() const { return std::tie(trans_a, trans_b, m, n, k, lda, ldb, ldc, accumulate, bf16, f16); }
  bool operator<(const GemmShape& o) const { return key() < o.key(); }
  double flops() const { return 2.0 * m * n * k; }
};

class GemmRecorder {
 public:
  void record(const GemmShape& s, int64_t times = 1) { calls_[s] += times; }
  const std::map<GemmShape, int64_t>& calls() const { return calls_; }
  double total_flops() const;
  void clear() { calls_.clear(); }

 private:
  std::map<GemmShape, int64_t> calls_;
};

// Time spent in sgemm() on this thread while a GemmClockScope is installed (benchmarks:
// the GEMMs' own rate inside a training step, their operand conversions included). CPU time
// is the calling thread's (CLOCK_THREAD_CPUTIME_ID): the whole product on one BLAS thread,
// and on a loaded machine far steadier than wall time; with more threads it misses theirs.
struct GemmClock {
  double wall_seconds = 0, cpu_seconds = 0, flops = 0;
  int64_t calls = 0;
};
class GemmClockScope {
 public:
  explicit GemmClockScope(GemmClock& c);
  ~GemmClockScope();
  GemmClockScope(const GemmClockScope&) = delete;
  GemmClockScope& operator=(const GemmClockScope&) = delete;

 private:
  GemmClock* previous_;
};

// Records s on this thread's recorder, if one is installed: for products that run outside
// sgemm (oneDNN's convolutions record the im2col GEMMs they stand for).
void record_gemm(const GemmShape& s);

// Installs a recorder on this thread for the scope's lifetime.
class GemmRecordScope {
 public:
  explicit GemmRecordScope(GemmRecorder& r);
  ~GemmRecordScope();
  GemmRecordScope(const GemmRecordScope&) = delete;
  GemmRecordScope& operator=(const GemmRecordScope&) = delete;

 private:
  GemmRecorder* previous_;
};

struct GemmBenchResult {
  double flops_per_round = 0;  // sum of 2mnk over all recorded calls
  double seconds_per_round = 0;
  double gflops() const { return seconds_per_round > 0 ? flops_per_round / seconds_per_round / 1e9 : 0; }
};

// Replays a record: every recorded call (with its multiplicity) as a raw product (bf16
// calls as gemm_bf16, the others) on one engine (by default the one sgemm() runs, so "fraction of sgemm" compares like with
// like) on scratch operands allocated once, one timed round per run_round() (e.g.
// interleaved with training steps, each step next to a ceiling measured under the same
// load).
class GemmReplay {
 public:
  // engine: every call on it; none: each call on the engine sgemm() would run it on.
  explicit GemmReplay(const GemmRecorder& rec, std::optional<GemmEngine> engine = std::nullopt);
  std::optional<GemmEngine> engine() const { return engine_; }
  double run_round();  // seconds
  double flops_per_round() const { return rec_.total_flops(); }

 private:
  const GemmRecorder& rec_;
  std::optional<GemmEngine> engine_;
  std::vector<float> a_, b_, c_;
};

// Runs every recorded call (with its multiplicity) on scratch matrices, repeating
// for at least min_seconds, and reports the sgemm rate of the fastest round on that
// exact mix of shapes, on the engine sgemm() runs.
GemmBenchResult benchmark_gemm_calls(const GemmRecorder& rec, double min_seconds = 1.0);

}  // namespace dpt
