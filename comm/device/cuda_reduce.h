#pragma once
// The CUDA kernels behind device_reduce.h (cuda_reduce.cu, compiled only in builds with
// CUDA; device_reduce.cpp names them only there). They run on the current device and
// synchronize; failures throw DeviceError with CUDA's text.
#include <cstddef>

#include "comm/types.h"

namespace dpt::device::cuda_kernels {

void reduce_into(void* acc, const void* in, size_t count, DType t, ReduceOp op);
void divide_in_place(void* buf, size_t count, DType t, int divisor);

}  // namespace dpt::device::cuda_kernels
