// AdaptiveAvgPool2d: NCHW -> [N, C, OH, OW]; output cell (i, j) averages input rows
// [floor(i*H/OH), ceil((i+1)*H/OH)) and columns [floor(j*W/OW), ceil((j+1)*W/OW)),
// PyTorch's rule (cells may overlap when OH does not divide H). ResNet uses (1, 1):
// the global average of each channel's plane.
// Backward spreads each output gradient evenly over its cell.
#pragma once

#include "models/nn/layer.h"

namespace dpt {

class AdaptiveAvgPool2d : public Layer {
 public:
  AdaptiveAvgPool2d(const std::string& name, int64_t out_h, int64_t out_w);
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }

 private:
  int64_t oh_, ow_;
  std::vector<int64_t> in_shape_;
  Tensor y_, dx_;
};

}  // namespace dpt
