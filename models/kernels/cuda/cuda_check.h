// cuda_check: the error checks every .cu file of models/kernels/cuda uses, so each CUDA failure
// reaches the caller as device::DeviceError with the call's name and CUDA's own text.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "device/runtime.h"

namespace dpt::gpu {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw device::DeviceError(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

// After a kernel launch: a bad configuration shows here, not at the next synchronisation.
inline void check_launch(const char* what) { check(cudaGetLastError(), what); }

}  // namespace dpt::gpu
