#include "parallel/precision/wire16.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "comm/half.h"
#include "models/kernels/cpu/f16_round.h"

namespace dpt {

void check_wire16(DType wire, const char* what) {
  if (wire != DType::bf16 && wire != DType::f16)
    throw std::invalid_argument(std::string(what) + ": 16-bit wire dtype must be bf16 or f16, not " + dtype_name(wire));
}

void pack16(DType wire, const float* src, uint16_t* dst, size_t n, float scale) {
  if (wire == DType::bf16)
    for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i] * scale);
  else
    for (size_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i] * scale);
}

void unpack16(DType wire, const uint16_t* src, float* dst, size_t n) {
  if (wire == DType::bf16)
    for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
  else
    for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void widen16_in_place(DType wire, float* buf, size_t n) {
  auto* bytes = reinterpret_cast<unsigned char*>(buf);
  for (size_t i = n; i-- > 0;) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    const float f = wire == DType::bf16 ? bf16_to_float(h) : half_to_float(h);
    std::memcpy(bytes + 4 * i, &f, 4);
  }
}

void round16(DType wire, std::span<float> x) {
  check_wire16(wire, "round16");
  if (wire == DType::bf16) round_bf16(x);
  else round_to_f16(x);
}

void round_bf16(std::span<float> x) {
  for (float& v : x) v = bf16_to_float(float_to_bf16(v));
}

}  // namespace dpt
