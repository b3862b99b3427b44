// Composite layers that hold other layers, for models assembled at run time (the public
// API's nn::Sequential and nn::Residual, dpt/nn.h):
//   SequentialBlock  children run in order; backward in reverse. Its used parameters are
//                    the children's, in order, so the model's use counts and the ready
//                    order (reverse registration) stay exact.
//   ResidualBlock    y = body(x) + shortcut(x), the shortcut the identity when it has no
//                    layers (torchvision's BasicBlock shape, any body). The body's
//                    parameters are registered first, so backward runs the shortcut first
//                    and announces the gradients in exactly the reverse order.
// Both round their inner activations and gradients to fp16 under ComputePrecision::kF16,
// as Module does at its own layer boundaries. CPU only (Module::to_cuda names them).
#pragma once

#include <memory>
#include <vector>

#include "models/nn/layer.h"

namespace dpt {

class SequentialBlock : public Layer {
 public:
  explicit SequentialBlock(std::string name) : Layer(std::move(name)) {}
  void add(std::unique_ptr<Layer> layer) { layers_.push_back(std::move(layer)); }
  bool empty() const { return layers_.empty(); }
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  std::vector<size_t> used_params() const override;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<bool> has_params_below_;  // per child: a parameter in an earlier child
  bool fp16_ = false;
};

class ResidualBlock : public Layer {
 public:
  // `shortcut` may be empty: the identity.
  ResidualBlock(std::string name, std::unique_ptr<SequentialBlock> body, std::unique_ptr<SequentialBlock> shortcut);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  std::vector<size_t> used_params() const override;

 private:
  std::unique_ptr<SequentialBlock> body_, shortcut_;
  Tensor y_, dx_;
};

}  // namespace dpt
