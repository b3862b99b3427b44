// One pre-norm transformer block (GPT-2):
//   x2  = x  + drop(attn(ln1(x)))
//   out = x2 + drop(mlp.proj(gelu(mlp.fc(ln2(x2)))))      mlp.fc: d -> 4d, mlp.proj: 4d -> d
// (drop: residual dropout, identity when the spec's dropout is 0 or in evaluation.)
// Backward walks the same sub-layers in reverse; the residual branches add their
// input gradients onto the skip path. Names and weight layout: models/nn/layers/gpt_spec.h.
#pragma once

#include "models/nn/layer.h"
#include "models/nn/layers/activations.h"
#include "models/nn/layers/attention.h"
#include "models/nn/layers/dropout.h"
#include "models/nn/layers/gpt_spec.h"
#include "models/nn/layers/layer_norm.h"
#include "models/nn/layers/linear.h"

namespace dpt {

class GptBlock : public Layer {
 public:
  GptBlock(ParamStore& store, const std::string& name, const GptBlockSpec& spec);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }
  std::vector<size_t> used_params() const override;

 private:
  LayerNorm ln1_;
  CausalSelfAttention attn_;
  LayerNorm ln2_;
  Linear fc_;
  Gelu gelu_;
  Linear proj_;
  Dropout mlp_drop_;
  Tensor x2_, out_, dx2_, dx_;
};

}  // namespace dpt
