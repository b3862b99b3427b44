// sgemm: C = alpha * op(A) * op(B) + beta * C, row-major, on the CPU GEMM engine chosen
// once per process (models/gemm_choice.h: DPT_GEMM=openblas|onednn|auto; the engines
// are models/gemm_engine.h). Every matrix product in models/ goes through here, so one
// place can count them: a GemmRecorder installed on the calling thread records each
// call's shape (m, n, k, transposes, leading dimensions). The trainer uses that record to
// compute model FLOPs (2*m*n*k per call) and to benchmark raw sgemm on exactly the
// shapes the model runs.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "models/gemm_choice.h"

namespace dpt {

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
           int lda, const float* b, int ldb, float beta, float* c, int ldc);
// The same product on device pointers (cuBLAS, gpu::sgemm) when `cuda`, else sgemm();
// recorded alike. sgemm_batched_on: `batch` products at fixed element strides.
void sgemm_on(bool cuda, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              int lda, const float* b, int ldb, float beta, float* c, int ldc);
void sgemm_batched_on(bool cuda, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                      int lda, int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c,
                      int ldc, int64_t stride_c, int batch);

// Threads every engine runs a product on (OPENBLAS_NUM_THREADS, else the cores);
// set_blas_threads changes it for the whole process (benchmarks).
int blas_threads();
void set_blas_threads(int n);

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;  // beta != 0
  auto key() const { return std::tie(trans_a, trans_b, m, n, k, lda, ldb, ldc, accumulate); }
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

// Replays a record: every recorded call (with its multiplicity) as a raw product on one
// engine (by default the one sgemm() runs, so "fraction of sgemm" compares like with
// like) on scratch operands allocated once, one timed round per run_round() (e.g.
// interleaved with training steps, each step next to a ceiling measured under the same
// load).
class GemmReplay {
 public:
  explicit GemmReplay(const GemmRecorder& rec, GemmEngine engine = gemm_engine());
  GemmEngine engine() const { return engine_; }
  double run_round();  // seconds
  double flops_per_round() const { return rec_.total_flops(); }

 private:
  const GemmRecorder& rec_;
  GemmEngine engine_;
  std::vector<float> a_, b_, c_;
};

// Runs every recorded call (with its multiplicity) on scratch matrices, repeating
// for at least min_seconds, and reports the sgemm rate of the fastest round on that
// exact mix of shapes, on the engine sgemm() runs.
GemmBenchResult benchmark_gemm_calls(const GemmRecorder& rec, double min_seconds = 1.0);

}  // namespace dpt
