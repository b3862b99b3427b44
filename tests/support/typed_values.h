#pragma once
// Exact expected values for collective tests: the tests' input values (small integers
// per (rank, index, op)) over comm/exact_values.h.
#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/exact_values.h"

namespace dpt::test {

// Input element i of rank r for reduce op `op`.
inline double input_value(int r, size_t i, ReduceOp op) {
  switch (op) {
    case ReduceOp::prod: return ((i + r) % 3 == 0) ? 2.0 : 1.0;
    case ReduceOp::min:
    case ReduceOp::max: return double((i * 31 + size_t(r) * 17) % 50);
    default: return double((r + 1) * int(i % 7 + 1));
  }
}

// The exact reduction over ranks 0..n-1 of element i (comm/exact_values.h).
inline void store_expected(DType t, void* base, size_t slot, size_t i, int n, ReduceOp op) {
  store_reduction(t, base, slot, n, op, [&](int r) { return input_value(r, i, op); });
}

// Index of the first differing element, or -1.
inline long first_mismatch(const std::vector<char>& got, const std::vector<char>& want, DType t) {
  size_t es = dtype_size(t);
  for (size_t i = 0; i < got.size() / es; ++i)
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) return long(i);
  return -1;
}

}  // namespace dpt::test
