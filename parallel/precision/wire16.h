#pragma once
// 16-bit copies of fp32 data for the wire (gradient compression, mixed precision).
//
// Terms:
//   wire dtype  bf16 or f16: the 16-bit format a buffer travels in. Reductions on it
//               run in float and round back once per addition (comm/half.h).
//   pack        dst[i] = round16(src[i] * scale); scale 1/N divides a gradient by the
//               world size *before* rounding, so a sum of N terms stays in f16's range
//               (PyTorch's fp16 compression hook does the same).
//   unpack      dst[i] = float(src[i]): exact, every 16-bit value is a float.
//   round_bf16  x[i] = float(bf16(x[i])) in place: the value a bf16 working copy holds.
//   round16     the same for either wire dtype (f16: models/kernels/cpu/f16_round.h's rounding).
//   widen in place  n 16-bit values in the first 2n bytes of an n-float buffer become
//               the n floats, widened from the top down (float i covers only 16-bit
//               elements >= i, already read), so a 16-bit allgather needs no staging.
#include <cstddef>
#include <cstdint>
#include <span>

#include "comm/types.h"

namespace dpt {

// Throws std::invalid_argument unless wire is bf16 or f16; `what` names the caller.
void check_wire16(DType wire, const char* what);
void pack16(DType wire, const float* src, uint16_t* dst, size_t n, float scale = 1.0f);
void unpack16(DType wire, const uint16_t* src, float* dst, size_t n);
void round_bf16(std::span<float> x);
void round16(DType wire, std::span<float> x);
void widen16_in_place(DType wire, float* buf, size_t n);

}  // namespace dpt
