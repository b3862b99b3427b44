// Composite layers that hold other layers, for models assembled at run time (the public
// API's nn::Sequential and nn::Residual, dpt/nn.h):
//   SequentialBlock  children run in order; backward in reverse. Its used parameters are
//                    the children's, in order, so the model's use counts and the ready
//                    order (reverse registration) stay exact.
//   InputsBlock      several inputs, each through its own block, outputs concatenated
//                    (below).
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


// Several inputs, one branch each: the input [n, F] holds each sample's inputs back to
// back (input i's numel(shape_i) values, in order); branch i runs on input i shaped
// [n, shape_i...], and the output [n, sum_i out_i] holds each sample's branch outputs,
// flattened, back to back (a two-tower model: an image and a feature vector). Branch
// parameters are registered in branch order, so backward runs the branches last first.
class InputsBlock : public Layer {
 public:
  struct Branch {
    std::vector<int64_t> shape;  // of one sample of this input
    std::unique_ptr<SequentialBlock> layers;
  };
  InputsBlock(std::string name, std::vector<Branch> branches);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  std::vector<size_t> used_params() const override;

 private:
  std::vector<Branch> branches_;
  std::vector<size_t> in_numel_, out_numel_;  // per sample, per branch (out: of the last forward)
  std::vector<Tensor> inputs_, grads_;         // per branch
  std::vector<std::vector<int64_t>> out_shapes_;
  Tensor y_, dx_;
  int64_t n_ = 0;
};

}  // namespace dpt
