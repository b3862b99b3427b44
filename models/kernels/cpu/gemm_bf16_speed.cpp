// bf16 against fp32 products, timed on this CPU (models/kernels/cpu/gemm.h, bf16_speed_note): native
// bf16 is not always faster. AMX runs bf16 tiles at many times fp32's rate, but
// AVX512-BF16 alone (AMD Zen 4, Intel Cooper Lake) only doubles the multiply-adds per
// instruction, and the operands are converted to bf16 on every call: there a GPT-2 step
// measured 0.55x fp32's speed. Users who asked for bf16 to go faster are told at start.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "models/kernels/cpu/cpu_features.h"
#include "models/kernels/cpu/gemm.h"

namespace dpt {

double measure_bf16_speedup() {
  if (!bf16_gemm_native()) return 0.0;
  struct Shape {
    bool ta, tb;
    int m, n, k;
  };
  // A transformer step's products: activations x weights, and both backward forms.
  const Shape shapes[] = {{false, false, 256, 768, 768}, {false, true, 256, 768, 768}, {true, false, 768, 768, 256}};
  std::vector<float> a(768 * 768, 0.01f), b(768 * 768, 0.02f), c(768 * 768, 0.0f);
  double best[2] = {0, 0};
  for (int round = 0; round < 4; ++round) {  // round 0: warm-up (oneDNN's JIT, thread start)
    double t[2] = {0, 0};
    for (int precision = 0; precision < 2; ++precision)
      for (const Shape& s : shapes) {
        const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
        const auto t0 = std::chrono::steady_clock::now();
        if (precision == 0)
          sgemm_with(gemm_engine(), s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n);
        else
          gemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n);
        t[precision] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    for (int p = 0; p < 2 && round > 0; ++p) best[p] = best[p] == 0 ? t[p] : std::min(best[p], t[p]);
  }
  return best[1] > 0 ? best[0] / best[1] : 0.0;
}

std::string bf16_speed_note() {
  if (!bf16_gemm_native()) return "";
  const double speedup = measure_bf16_speedup();
  char buf[400];
  const CpuFeatures& f = cpu_features();
  std::snprintf(buf, sizeof buf,
                "bf16 products measured %.2fx fp32's speed here (256x768x768 products, %d thread%s, %s)%s", speedup,
                blas_threads(), blas_threads() == 1 ? "" : "s",
                f.amx_bf16 ? "AMX-BF16" : "AVX512-BF16 without AMX",
                speedup < 1.0 ? ": --precision bf16 is slower than fp32 on this CPU (its numerics are bf16's all the same)"
                              : "");
  return buf;
}

}  // namespace dpt
