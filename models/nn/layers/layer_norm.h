// LayerNorm over the last dimension D:
//   mean = sum(x)/D, rstd = 1/sqrt(var + eps), xhat = (x - mean) * rstd,
//   y = xhat * weight + bias.
// Backward (per row, g = dy * weight):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
#pragma once

#include "models/nn/layer.h"

namespace dpt {

class LayerNorm : public Layer {
 public:
  LayerNorm(ParamStore& store, const std::string& name, int64_t dim, float eps = 1e-5f);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }
  std::vector<size_t> used_params() const override { return {w_, b_}; }

 private:
  ParamStore& store_;
  int64_t d_;
  float eps_;
  size_t w_ = 0, b_ = 0;
  const Tensor* x_ = nullptr;
  std::vector<float> mean_, rstd_;
  Tensor stats_;  // on a CUDA input: mean and rstd per row, on the device
  Tensor y_, dx_;
};

}  // namespace dpt
