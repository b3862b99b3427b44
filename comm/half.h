#pragma once
// IEEE half (f16) and bfloat16 conversions. Reductions on 16-bit types are done in
// float and rounded back (round to nearest even), as NCCL and Gloo do.
#include <cstdint>
#include <cstring>

namespace dpt {

inline float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // keep NaN a NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float half_to_float(uint16_t h) {
#if defined(__FLT16_MANT_DIG__)
  _Float16 x;
  std::memcpy(&x, &h, 2);
  return static_cast<float>(x);
#else
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
  if (exp == 0) {
    if (mant == 0) u = sign;
    else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      u = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) u = sign | 0x7f800000u | (mant << 13);
  else u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

inline uint16_t float_to_half(float f) {
#if defined(__FLT16_MANT_DIG__)
  _Float16 x = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
#else
#error "float_to_half needs _Float16 (g++ >= 12 on x86-64)"
#endif
}

}  // namespace dpt
