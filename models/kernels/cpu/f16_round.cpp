#include "models/kernels/cpu/f16_round.h"

#include <immintrin.h>

#include "models/kernels/cpu/cpu_features.h"

namespace dpt {
namespace {

// 8 values per step through the F16C conversions (vcvtps2ph with round-to-nearest-even).
__attribute__((target("avx,f16c"))) void round_f16c(float* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) x[i] = static_cast<float>(static_cast<_Float16>(x[i]));
}

void round_portable(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<_Float16>(x[i]));
}

}  // namespace

void round_to_f16(float* x, size_t n) {
  static const bool f16c = cpu_features().f16c && cpu_features().avx;  // DPT_MAX_CPU_ISA applied
  if (f16c) round_f16c(x, n);
  else round_portable(x, n);
}

}  // namespace dpt
