// One pre-norm transformer block (GPT-2):
//   x2  = x  + attn(ln1(x))
//   out = x2 + mlp.proj(gelu(mlp.fc(ln2(x2))))      mlp.fc: d -> 4d, mlp.proj: 4d -> d
// Backward walks the same sub-layers in reverse; the residual branches add their
// input gradients onto the skip path.
#pragma once

#include "models/layer.h"
#include "models/layers/activations.h"
#include "models/layers/attention.h"
#include "models/layers/layer_norm.h"
#include "models/layers/linear.h"

namespace dpt {

class GptBlock : public Layer {
 public:
  GptBlock(ParamStore& store, const std::string& name, int64_t dim, int64_t heads,
           int64_t n_layer);
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
  Tensor x2_, out_, dx2_, dx_;
};

}  // namespace dpt
