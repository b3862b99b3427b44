// comm/reduce_kernels.h on 16-bit floats: the F16C (f16) and AVX2 (bf16) loops, where this
// run has them (comm.reduce_kernels.isa.<level> caps them off with DPT_MAX_CPU_ISA), give
// the bits of the scalar formula: widen, reduce in float, round to nearest even. Random bit
// patterns, so NaN, infinities and subnormals are among the inputs; counts around the
// 8-lane steps, the tail included. A NaN is due a NaN, its payload aside: F16C quiets a
// signalling one, and which of two NaN operands a sum passes on is the compiler's choice.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "comm/half.h"
#include "comm/reduce_kernels.h"
#include "device/cpu_isa.h"

using namespace dpt;

namespace {

float apply(float x, float y, ReduceOp op) {
  switch (op) {
    case ReduceOp::prod: return x * y;
    case ReduceOp::min: return std::min(x, y);
    case ReduceOp::max: return std::max(x, y);
    default: return x + y;  // sum, avg (the caller divides at the end)
  }
}

bool is_nan(uint16_t h, DType t) {
  return t == DType::f16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

}  // namespace

TEST_CASE("reduce_pair on f16 and bf16: the vector loops give the scalar formula's bits", "[reduce_kernels]") {
  INFO("DPT_MAX_CPU_ISA level " << cpu_isa_name(max_cpu_isa()));
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  for (const DType t : {DType::f16, DType::bf16})
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg})
      for (const size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{17}, size_t{1003}}) {
        INFO((t == DType::f16 ? "f16" : "bf16") << " op " << int(op) << " n " << n);
        std::vector<uint16_t> a(n), b(n), out(n), want(n);
        for (size_t i = 0; i < n; ++i) a[i] = uint16_t(bits(gen)), b[i] = uint16_t(bits(gen));
        for (size_t i = 0; i < n; ++i)
          want[i] = t == DType::f16 ? float_to_half(apply(half_to_float(a[i]), half_to_float(b[i]), op))
                                    : float_to_bf16(apply(bf16_to_float(a[i]), bf16_to_float(b[i]), op));
        reduce_pair(out.data(), a.data(), b.data(), n, t, op);
        size_t differ = 0, first = n;
        for (size_t i = 0; i < n; ++i)
          if (out[i] != want[i] && !(is_nan(out[i], t) && is_nan(want[i], t)) && differ++ == 0) first = i;
        INFO("first difference at " << first << (first < n ? ": " + std::to_string(out[first]) + " against " +
                                                                 std::to_string(want[first])
                                                           : std::string()));
        CHECK(differ == 0);
        reduce_into(a.data(), b.data(), n, t, op);  // in place: the same bits
        CHECK(a == out);
      }
}
