// PyTorch tensors as the communicator's Buffers, for the libtorch wrappers (ddp.h,
// zero.h): the dtypes a gradient or a parameter may have, checked with an error that
// names the tensor and the call.
#pragma once

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

#include "comm/types.h"

namespace dpt::torch {

inline DType comm_dtype(const at::Tensor& t, const std::string& where) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::f32;
    case at::kDouble: return DType::f64;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    default:
      throw std::invalid_argument(where + " is " + std::string(c10::toString(t.scalar_type())) +
                                  ": the wrappers average float32, float64, float16 and bfloat16 tensors");
  }
}

// A dense CPU or CUDA tensor checked for the wrappers: `where` names it in the error.
inline void check_dense(const at::Tensor& t, const std::string& where) {
  if (t.layout() != at::kStrided) throw std::invalid_argument(where + " is not a dense (strided) tensor");
  if (!t.is_cpu() && !t.is_cuda())
    throw std::invalid_argument(where + " is on device " + t.device().str() + ": the wrappers take cpu and cuda tensors");
  comm_dtype(t, where);
}

// The whole of a contiguous tensor as one buffer (device buffers for CUDA tensors: NCCL
// reduces them in place, the tcp and mpi backends stage them through host memory).
inline Buffer whole(const at::Tensor& contiguous) {
  Buffer b;
  b.data = contiguous.data_ptr();
  b.count = static_cast<size_t>(contiguous.numel());
  b.dtype = comm_dtype(contiguous, "tensor");
  if (contiguous.is_cuda()) b.device = Device{DeviceKind::cuda, contiguous.device().index()};
  return b;
}

}  // namespace dpt::torch
