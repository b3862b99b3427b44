// A user's dpt::nn::CustomLayer as an internal layer: its parameters in the model's
// store (so DDP buckets them, ZeRO shards them, checkpoints hold them), its forward and
// backward handed public tensors. The copies in and out cost one pass over the layer's
// input and output each way.
#pragma once

#include <memory>
#include <vector>

#include "dpt/nn.h"
#include "models/nn/layer.h"

namespace dpt {

class CustomLayerAdapter : public Layer {
 public:
  CustomLayerAdapter(ParamStore& store, const std::string& name, std::shared_ptr<nn::CustomLayer> user);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  std::vector<size_t> used_params() const override { return params_; }

 private:
  std::vector<std::span<const float>> param_views() const;

  ParamStore& store_;
  std::shared_ptr<nn::CustomLayer> user_;
  std::vector<size_t> params_;
  nn::Tensor x_, y_;  // this forward's input and output, as the user's code saw them
  Tensor out_, dx_;
};

}  // namespace dpt
