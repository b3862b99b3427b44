#include "comm/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "comm/half.h"

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
      return reduce_16<half_to_float, float_to_half>((uint16_t*)out, (const uint16_t*)a, (const uint16_t*)b, n, op);
    case DType::bf16:
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
