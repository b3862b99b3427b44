// fast_exp: expf that GCC can vectorise with plain SSE2 (no libm call, no branches).
// Terms: x = n*ln2 + r with n an integer and |r| <= ln2/2; exp(r) is Cephes' degree-6
// polynomial (about 1 ulp on that range) and 2^n is built in the exponent bits.
// n is rounded with the 1.5*2^23 trick, which needs no SSE4.1 round instruction.
// Inputs are clamped to [-87.3, 88.3] (n stays in [-126, 127]), where expf is finite and normal.
#pragma once

#include <bit>
#include <cstdint>

// Elementwise loops are compiled three times and one copy is picked at load time by
// the CPU's ISA level (x86-64-v4: AVX-512; v3: AVX2 + FMA; else the SSE2 baseline), so the
// binary stays portable. ISA levels test features, not CPU models: "arch=haswell" tests
// for an Intel Haswell and so picked the baseline copy on AMD CPUs.
#define DPT_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace dpt {

// always_inline: the callers' target_clones copies (AVX2, AVX-512) would otherwise keep a
// call per element to the baseline copy of this function (GCC does not inline across
// the target change by itself), which made GELU's forward a scalar loop (8 ns/element).
[[gnu::always_inline]] inline float fast_exp(float x) {
  // Clamp with plain selects, not std::min/max (which GCC would not inline into the
  // clones either); a NaN passes through both.
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return e * std::bit_cast<float>(bits);
}

// tanh(u) = 1 - 2 / (exp(2u) + 1); saturates cleanly to +-1.
[[gnu::always_inline]] inline float fast_tanh(float u) { return 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f); }

}  // namespace dpt
