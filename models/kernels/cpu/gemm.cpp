#include "models/kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "models/kernels/cuda/gpu_ops.h"

namespace dpt {
namespace {
thread_local GemmRecorder* t_recorder = nullptr;
thread_local GemmPrecision t_precision = GemmPrecision::f32;
thread_local GemmClock* t_clock = nullptr;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Runs f, adding its time and `calls` products of 2*m*n*k FLOPs each to this thread's
// GemmClock when one is installed.
template <class F>
void clocked(int m, int n, int k, int calls, F&& f) {
  if (!t_clock) return f();
  GemmClock& clock = *t_clock;
  const auto w0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu_seconds();
  f();
  clock.cpu_seconds += thread_cpu_seconds() - c0;
  clock.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  clock.flops += 2.0 * m * n * k * calls;
  clock.calls += calls;
}

void sgemm_untimed(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                   const float* b, int ldb, float beta, float* c, int ldc) {
  const bool bf16 = t_precision == GemmPrecision::bf16 && bf16_gemm_native();
  if (t_recorder)
    t_recorder->record({trans_a, trans_b, m, n, k, lda, ldb, ldc, beta != 0.0f, bf16});
  if (bf16) return gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  sgemm_with(gemm_engine_for(m, n, k), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}  // namespace

GemmClockScope::GemmClockScope(GemmClock& c) : previous_(t_clock) { t_clock = &c; }
GemmClockScope::~GemmClockScope() { t_clock = previous_; }

const char* gemm_precision_name(GemmPrecision p) {
  return p == GemmPrecision::bf16 ? "bf16" : p == GemmPrecision::f16 ? "fp16" : "fp32";
}

GemmPrecision gemm_precision() { return t_precision; }
GemmPrecisionScope::GemmPrecisionScope(GemmPrecision p) : previous_(t_precision) { t_precision = p; }
GemmPrecisionScope::~GemmPrecisionScope() { t_precision = previous_; }

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
           int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  clocked(m, n, k, 1, [&] { sgemm_untimed(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
}

void sgemm_bf16_operands(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a,
                         const uint16_t* b, float beta, float* c, int ldc) {
  const int lda = trans_a ? m : k, ldb = trans_b ? k : n;  // dense in their stored layout
  if (t_recorder) t_recorder->record({trans_a, trans_b, m, n, k, lda, ldb, ldc, beta != 0.0f, bf16_gemm_native()});
  clocked(m, n, k, 1, [&] { gemm_bf16_operands(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, ldc); });
}

void sgemm_on(bool cuda, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (!cuda) return sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  // bf16 or fp16 on tensor cores (bf16 as on the CPU's AMX): the precision Module set for
  // this pass.
  const bool bf16 = t_precision == GemmPrecision::bf16 && k > 0, f16 = t_precision == GemmPrecision::f16 && k > 0;
  if (t_recorder)
    t_recorder->record({trans_a, trans_b, m, n, k, lda, ldb, ldc, beta != 0.0f, bf16, f16});
  if (bf16) return gpu::gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (f16) return gpu::gemm_f16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  gpu::sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemm_batched_on(bool cuda, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                      int lda, int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c,
                      int ldc, int64_t stride_c, int batch) {
  if (cuda) {
    const bool bf16 = t_precision == GemmPrecision::bf16 && k > 0, f16 = t_precision == GemmPrecision::f16 && k > 0;
    if (t_recorder)
      t_recorder->record({trans_a, trans_b, m, n, k, lda, ldb, ldc, beta != 0.0f, bf16, f16}, batch);
    if (bf16)
      return gpu::gemm_bf16_batched(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                                    ldc, stride_c, batch);
    if (f16)
      return gpu::gemm_f16_batched(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                                   ldc, stride_c, batch);
    gpu::sgemm_batched(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                       stride_c, batch);
    return;
  }
  if (t_precision == GemmPrecision::bf16 && bf16_gemm_native() && batch > 1) {
    // One oneDNN call for the batch (recorded and timed as its members).
    if (t_recorder) t_recorder->record({trans_a, trans_b, m, n, k, lda, ldb, ldc, beta != 0.0f, true}, batch);
    clocked(m, n, k, batch, [&] {
      gemm_bf16_batched(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                        stride_c, batch);
    });
    return;
  }
  for (int i = 0; i < batch; ++i)
    sgemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c,
          ldc);
}

int blas_threads() { return openblas_get_num_threads(); }
void set_blas_threads(int n) { openblas_set_num_threads(n); }

double GemmRecorder::total_flops() const {
  double f = 0;
  for (const auto& [shape, count] : calls_) f += shape.flops() * static_cast<double>(count);
  return f;
}

void record_gemm(const GemmShape& s) {
  if (t_recorder) t_recorder->record(s);
}

GemmRecordScope::GemmRecordScope(GemmRecorder& r) : previous_(t_recorder) { t_recorder = &r; }
GemmRecordScope::~GemmRecordScope() { t_recorder = previous_; }

GemmReplay::GemmReplay(const GemmRecorder& rec, std::optional<GemmEngine> engine) : rec_(rec), engine_(engine) {
  // Scratch operands sized for the largest call; values are irrelevant to speed
  // but kept small and finite so no denormal or NaN path is taken.
  size_t max_a = 0, max_b = 0, max_c = 0;
  for (const auto& [s, count] : rec.calls()) {
    max_a = std::max(max_a, static_cast<size_t>(s.trans_a ? s.k : s.m) * s.lda);
    max_b = std::max(max_b, static_cast<size_t>(s.trans_b ? s.n : s.k) * s.ldb);
    max_c = std::max(max_c, static_cast<size_t>(s.m) * s.ldc);
  }
  a_.assign(max_a, 0.01f);
  b_.assign(max_b, 0.02f);
  c_.assign(max_c, 0.0f);
}

double GemmReplay::run_round() {
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& [s, count] : rec_.calls())
    for (int64_t i = 0; i < count; ++i)
      if (s.bf16)
        gemm_bf16(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a_.data(), s.lda, b_.data(), s.ldb,
                  s.accumulate ? 1.0f : 0.0f, c_.data(), s.ldc);
      else
        sgemm_with(engine_ ? *engine_ : gemm_engine_for(s.m, s.n, s.k), s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a_.data(), s.lda, b_.data(), s.ldb,
                   s.accumulate ? 1.0f : 0.0f, c_.data(), s.ldc);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

GemmBenchResult benchmark_gemm_calls(const GemmRecorder& rec, double min_seconds) {
  GemmBenchResult r;
  r.flops_per_round = rec.total_flops();
  if (rec.calls().empty()) return r;
  GemmReplay replay(rec);
  replay.run_round();  // warm-up: thread pool start, caches
  // Best round, not the mean: on a shared machine the mean absorbs other processes'
  // noise, and the best round is the honest ceiling to compare training against.
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  double best = 0;
  do {
    const double t = replay.run_round();
    if (best == 0 || t < best) best = t;
  } while (std::chrono::duration<double>(clock::now() - start).count() < min_seconds);
  r.seconds_per_round = best;
  return r;
}

}  // namespace dpt
