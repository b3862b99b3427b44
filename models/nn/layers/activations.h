// Elementwise activations.
//   ReLU: y = max(x, 0); dy/dx = 1 where x > 0.
//   GELU: the tanh approximation used by GPT-2,
//         y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
#pragma once

#include "models/nn/layer.h"

namespace dpt {

class Relu : public Layer {
 public:
  explicit Relu(const std::string& name) : Layer(name) {}
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }

 private:
  Tensor y_, dx_;
};

class Gelu : public Layer {
 public:
  explicit Gelu(const std::string& name) : Layer(name) {}
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }

 private:
  const Tensor* x_ = nullptr;
  Tensor y_, tanh_, dx_;  // tanh(u) is kept from forward so backward needs no exp
};

// Kernels, exposed for the fused uses inside composite layers and for tests.
void gelu_forward(const float* x, float* y, float* tanh_out, size_t n);
void gelu_backward(const float* x, const float* tanh_in, const float* dy, float* dx, size_t n);

}  // namespace dpt
