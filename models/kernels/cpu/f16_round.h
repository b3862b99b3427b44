// Rounding to IEEE half precision (fp16) on the CPU, for running a model "in fp16"
// with fp32 arithmetic (Module::set_compute_precision): each value is rounded to the
// nearest half (ties to even) and widened back, so what fp16 cannot hold is really
// lost: |x| >= 65520 becomes inf, |x| < 2^-25 becomes 0, values below 2^-14 keep only
// the bits of a subnormal half, NaN stays NaN.
//
// comm/half.h has the element conversions for the wire; models/ may not include comm/,
// and this needs only the in-place round trip (vectorised with F16C where the CPU has it).
#pragma once

#include <cstddef>
#include <span>

namespace dpt {

enum class ComputePrecision { kF32, kF16 };

void round_to_f16(float* x, size_t n);
inline void round_to_f16(std::span<float> x) { round_to_f16(x.data(), x.size()); }

}  // namespace dpt
