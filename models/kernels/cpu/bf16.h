// bfloat16 bits for the CPU's bf16 products (models/kernels/cpu/gemm.h): fp32 -> bf16 round to nearest
// even and back, scalar (inline, branch-free so loops vectorise) and over arrays.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace dpt {

// NaN stays a (quiet) NaN, overflow becomes inf.
inline uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

// n values at once, as bf16_bits (VCVTNEPS2BF16 where the CPU has AVX512-BF16; it reads
// fp32 subnormals as zero, which no training operand depends on).
void to_bf16(const float* src, uint16_t* dst, int64_t n);

// An fp32 array's bf16 copy, made once and kept for the products that share it (a layer's
// weights in forward and backward-data, its input in forward and backward-weights, dY in
// both backward products): the operands of models/kernels/cpu/gemm.h's sgemm_bf16_operands.
class Bf16Copy {
 public:
  // Converts src[0, n) (on parallel_for's threads when large); returns the copy.
  const uint16_t* convert(const float* src, int64_t n);
  const uint16_t* data() const { return v_.data(); }

 private:
  std::vector<uint16_t> v_;
};

}  // namespace dpt
