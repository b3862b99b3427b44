#include "comm/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "comm/half.h"
#include "device/cpu_isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dpt {
namespace {

template <typename T, typename F>
void apply(T* __restrict out, const T* a, const T* b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

template <typename T>
void reduce_typed(T* out, const T* a, const T* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: apply(out, a, b, n, [](T x, T y) { return T(x + y); }); break;
    case ReduceOp::prod: apply(out, a, b, n, [](T x, T y) { return T(x * y); }); break;
    case ReduceOp::min: apply(out, a, b, n, [](T x, T y) { return std::min(x, y); }); break;
    case ReduceOp::max: apply(out, a, b, n, [](T x, T y) { return std::max(x, y); }); break;
  }
}

// 16-bit floats: widen a block to float, reduce, narrow. Blocks keep it in L1.
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void reduce_16(uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n, ReduceOp op) {
  constexpr size_t kBlock = 256;
  float fa[kBlock], fb[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) fa[i] = ToF(a[base + i]);
    for (size_t i = 0; i < m; ++i) fb[i] = ToF(b[base + i]);
    reduce_typed(fa, fa, fb, m, op);
    for (size_t i = 0; i < m; ++i) out[base + i] = FromF(fa[i]);
  }
}

#if defined(__x86_64__)
// f16 with the CPU's F16C conversions, 8 lanes at a time. Without them g++ converts each
// _Float16 through a libgcc call, which caps f16 reductions far below memory speed.
// _mm256_cvtps_ph rounds to nearest even, exactly like float_to_half; min/max take
// their arguments in the order that reproduces std::min/std::max (NaN included).
__attribute__((target("avx,f16c"))) void reduce_f16_f16c(uint16_t* out, const uint16_t* a, const uint16_t* b,
                                                          size_t n, ReduceOp op) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m256 r;
    switch (op) {
      case ReduceOp::prod: r = _mm256_mul_ps(x, y); break;
      case ReduceOp::min: r = _mm256_min_ps(y, x); break;
      case ReduceOp::max: r = _mm256_max_ps(y, x); break;
      default: r = _mm256_add_ps(x, y); break;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) reduce_16<half_to_float, float_to_half>(out + i, a + i, b + i, n - i, op);
}

// bf16 in AVX2 integer lanes: widen is a 16-bit shift, narrowing rounds to nearest even
// and keeps NaN a NaN exactly as float_to_bf16 does.
__attribute__((target("avx2"))) void reduce_bf16_avx2(uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n,
                                                      ReduceOp op) {
  const __m256i one = _mm256_set1_epi32(1), round = _mm256_set1_epi32(0x7fff), abs_mask = _mm256_set1_epi32(0x7fffffff),
                inf = _mm256_set1_epi32(0x7f800000), quiet = _mm256_set1_epi32(0x40);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i))), 16));
    __m256 y = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i))), 16));
    __m256 r;
    switch (op) {
      case ReduceOp::prod: r = _mm256_mul_ps(x, y); break;
      case ReduceOp::min: r = _mm256_min_ps(y, x); break;
      case ReduceOp::max: r = _mm256_max_ps(y, x); break;
      default: r = _mm256_add_ps(x, y); break;
    }
    __m256i u = _mm256_castps_si256(r);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, round), lsb), 16);
    __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    __m256i v = _mm256_blendv_epi8(rounded, nan, is_nan);
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  if (i < n) reduce_16<bf16_to_float, float_to_bf16>(out + i, a + i, b + i, n - i, op);
}

// At most DPT_MAX_CPU_ISA's level (F16C counts as avx2's, device/cpu_isa.h).
bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && max_cpu_isa() >= CpuIsa::avx2;
  return yes;
}

bool have_f16c() {
  static const bool yes =
      __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx") && max_cpu_isa() >= CpuIsa::avx2;
  return yes;
}
#endif

}  // namespace

void reduce_pair(void* out, const void* a, const void* b, size_t n, DType t, ReduceOp op) {
  switch (t) {
    case DType::f32: return reduce_typed((float*)out, (const float*)a, (const float*)b, n, op);
    case DType::f64: return reduce_typed((double*)out, (const double*)a, (const double*)b, n, op);
    case DType::i8: return reduce_typed((int8_t*)out, (const int8_t*)a, (const int8_t*)b, n, op);
    case DType::u8: return reduce_typed((uint8_t*)out, (const uint8_t*)a, (const uint8_t*)b, n, op);
    case DType::i32: return reduce_typed((int32_t*)out, (const int32_t*)a, (const int32_t*)b, n, op);
    case DType::i64: return reduce_typed((int64_t*)out, (const int64_t*)a, (const int64_t*)b, n, op);
    case DType::f16:
#if defined(__x86_64__)
      if (have_f16c()) return reduce_f16_f16c((uint16_t*)out, (const uint16_t*)a, (const uint16_t*)b, n, op);
#endif
      return reduce_16<half_to_float, float_to_half>((uint16_t*)out, (const uint16_t*)a, (const uint16_t*)b, n, op);
    case DType::bf16:
#if defined(__x86_64__)
      if (have_avx2()) return reduce_bf16_avx2((uint16_t*)out, (const uint16_t*)a, (const uint16_t*)b, n, op);
#endif
      return reduce_16<bf16_to_float, float_to_bf16>((uint16_t*)out, (const uint16_t*)a, (const uint16_t*)b, n, op);
  }
  throw std::invalid_argument("reduce: invalid dtype");
}

void reduce_into(void* acc, const void* in, size_t n, DType t, ReduceOp op) {
  reduce_pair(acc, acc, in, n, t, op);
}

namespace {
template <typename T> void divide_typed(T* p, size_t n, int d) {
  for (size_t i = 0; i < n; ++i) p[i] = T(p[i] / T(d));
}
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void divide_16(uint16_t* p, size_t n, int d) {
  for (size_t i = 0; i < n; ++i) p[i] = FromF(ToF(p[i]) / float(d));
}
}  // namespace

void divide_in_place(void* buf, size_t n, DType t, int d) {
  switch (t) {
    case DType::f32: return divide_typed((float*)buf, n, d);
    case DType::f64: return divide_typed((double*)buf, n, d);
    case DType::i8: return divide_typed((int8_t*)buf, n, d);
    case DType::u8: return divide_typed((uint8_t*)buf, n, d);
    case DType::i32: return divide_typed((int32_t*)buf, n, d);
    case DType::i64: return divide_typed((int64_t*)buf, n, d);
    case DType::f16: return divide_16<half_to_float, float_to_half>((uint16_t*)buf, n, d);
    case DType::bf16: return divide_16<bf16_to_float, float_to_bf16>((uint16_t*)buf, n, d);
  }
}

}  // namespace dpt
