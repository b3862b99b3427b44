#pragma once
// Element-wise reductions on device data, the device side of comm/reduce_kernels.h that
// collectives on device buffers use: host loops for host memory and the emulated device,
// CUDA kernels (cuda_reduce.cu) for a real one. Device memory itself is device/runtime.h's.
#include <cstddef>

#include "comm/types.h"
#include "device/runtime.h"

namespace dpt::device {

// acc[i] = acc[i] (op) in[i] on device data, every DType (f16/bf16 in fp32); `avg`
// reduces like sum. Synchronous.
void reduce_into(const Device& d, void* acc, const void* in, size_t count, DType t, ReduceOp op);
// buf[i] /= divisor on device data (integers truncate toward zero). Synchronous.
void divide_in_place(const Device& d, void* buf, size_t count, DType t, int divisor);

}  // namespace dpt::device
