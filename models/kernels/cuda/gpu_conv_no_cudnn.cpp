// gpu_ops.h's convolutions in a CUDA build that found no cuDNN headers: each raises
// DeviceError saying so (the other kernels are there; only Conv2d on a GPU needs cuDNN).
#include "device/runtime.h"
#include "models/kernels/cuda/gpu_ops.h"

namespace dpt::gpu {

namespace {
[[noreturn]] void no_cudnn() {
  throw device::DeviceError(
      "this build found no cuDNN headers next to CUDA (cudnn_version.h): convolutions on a GPU (the cnn and "
      "resnet18 models) need cuDNN 9 at build time (or --device cpu)");
}
}  // namespace

void conv2d_forward(const ConvShape&, const float*, const float*, float*) { no_cudnn(); }
void conv2d_backward_data(const ConvShape&, const float*, const float*, float*) { no_cudnn(); }
void conv2d_backward_filter(const ConvShape&, const float*, const float*, float*) { no_cudnn(); }

}  // namespace dpt::gpu
