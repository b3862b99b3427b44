// Dispatch of device_reduce.h. In a build without CUDA the kernels do not exist: the
// `if constexpr` below never names them there (no stand-in needed), and a device buffer
// gets device/'s one "no CUDA" error.
#include "comm/device/device_reduce.h"

#include "comm/device/cuda_reduce.h"
#include "comm/reduce_kernels.h"

namespace dpt::device {

namespace {
constexpr bool kCudaKernels = DPT_COMM_CUDA_KERNELS;  // set by comm/CMakeLists.txt
}  // namespace

void reduce_into(const Device& d, void* acc, const void* in, size_t n, DType t, ReduceOp op) {
  if (d.is_cpu() || emulated()) return dpt::reduce_into(acc, in, n, t, op);
  if constexpr (kCudaKernels) {
    set_current(d);
    cuda_kernels::reduce_into(acc, in, n, t, op);
  } else {
    throw_not_built("reduce on " + d.str());
  }
}

void divide_in_place(const Device& d, void* buf, size_t n, DType t, int divisor) {
  if (d.is_cpu() || emulated()) return dpt::divide_in_place(buf, n, t, divisor);
  if constexpr (kCudaKernels) {
    set_current(d);
    cuda_kernels::divide_in_place(buf, n, t, divisor);
  } else {
    throw_not_built("divide on " + d.str());
  }
}

}  // namespace dpt::device
