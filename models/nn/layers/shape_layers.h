// Layers that move values around without arithmetic on them.
//   MaxPool2d: NCHW, window k, stride s (default k), padding p (implicit -inf, so a
//              window takes the max of its real pixels); output floor((H + 2p - k)/s) + 1.
//              Remembers which input won each window (the first maximum in row-major
//              order, as PyTorch) so backward routes the gradient to it alone.
//              On CUDA, one thread per output (forward) and one per input (backward: it
//              adds the gradients of the outputs that took it, no atomics).
//   Flatten:   [N, d1, d2, ...] -> [N, d1*d2*...]; backward reshapes back.
#pragma once

#include "models/kernels/cuda/device_floats.h"
#include "models/nn/layer.h"

namespace dpt {

class MaxPool2d : public Layer {
 public:
  MaxPool2d(const std::string& name, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  // Forward's loops compiled for AVX-512 where the CPU has it (default), or the baseline
  // build's (tests compare the two).
  void set_avx512(bool on) { avx512_ = on; }
  static bool avx512_available();
  bool supports_cuda() const override { return true; }

 private:
  int64_t k_, stride_, pad_;
  bool avx512_ = true;
  const Tensor* x_ = nullptr;
  std::vector<int32_t> argmax_;  // flat index within the input plane, per output
  DeviceFloats argmax_device_;   // the same on CUDA (int32 bits in a float-sized array)
  Tensor y_, dx_;
};

class Flatten : public Layer {
 public:
  explicit Flatten(const std::string& name) : Layer(name) {}
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }

 private:
  std::vector<int64_t> in_shape_;
  Tensor y_, dx_;
};

}  // namespace dpt
