#pragma once
// Element-wise reduction kernels for every DType, written as plain loops the compiler
// vectorizes at -O3. `avg` reduces like `sum`; the caller divides once at the end.
#include <cstddef>

#include "comm/types.h"

namespace dpt {

// acc[i] = acc[i] (op) in[i], for i < count.
void reduce_into(void* acc, const void* in, size_t count, DType t, ReduceOp op);
// out[i] = a[i] (op) b[i]; out may alias a or b.
void reduce_pair(void* out, const void* a, const void* b, size_t count, DType t, ReduceOp op);
// buf[i] /= divisor (integer types truncate toward zero, as integer division does).
void divide_in_place(void* buf, size_t count, DType t, int divisor);

}  // namespace dpt
