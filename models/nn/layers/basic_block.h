// ResNet's BasicBlock (torchvision.models.resnet.BasicBlock, expansion 1):
//   out = relu(bn2(conv2(relu(bn1(conv1(x))))) + identity)
//   conv1: 3x3, stride s, padding 1; conv2: 3x3, stride 1, padding 1 (no biases);
//   identity = x, or downsample(x) = bn(conv1x1 stride s (x)) when the stride is not 1
//   or the channel count changes ("downsample.0", "downsample.1" as in torchvision).
// bn1 carries the ReLU fused. Parameters are registered conv1, bn1, conv2, bn2,
// downsample (torchvision's order, = forward order); backward runs the downsample
// branch first, so gradients are announced in exactly the reverse order.
// With ComputePrecision::kF16 every inner activation and gradient is rounded to fp16.
#pragma once

#include <memory>

#include "models/nn/layer.h"
#include "models/nn/layers/batch_norm.h"
#include "models/nn/layers/conv2d.h"

namespace dpt {

class BasicBlock : public Layer {
 public:
  BasicBlock(ParamStore& store, const std::string& name, int64_t in_planes, int64_t planes, int64_t stride);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  std::vector<size_t> used_params() const override;
  bool supports_cuda() const override { return true; }  // its layers' CUDA paths, two kernels

 private:
  Conv2d conv1_;
  BatchNorm bn1_;
  Conv2d conv2_;
  BatchNorm bn2_;
  std::unique_ptr<Conv2d> ds_conv_;
  std::unique_ptr<BatchNorm> ds_bn_;
  bool fp16_ = false;
  Tensor out_, g_, dx_;
};

}  // namespace dpt
