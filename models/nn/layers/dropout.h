// Dropout: in training, zero each element with probability p and scale the rest by
// 1/(1-p) (inverted dropout, as PyTorch); in evaluation, or with p = 0, the input
// passes through untouched (the same tensor is returned: no copy).
//
// Terms:
//   layer key  a 64-bit number fixed per layer, param_seed(model seed, layer name),
//              set by init_params (or set_seed for a layer used on its own).
//   draw key   dropout_draw_key(layer key, step, stream): one training forward's key.
//              step is ForwardContext::rng_step (the module counts its training
//              forwards), stream is ForwardContext::rng_stream (e.g. a rank).
//   kept(i)    element i of a tensor is kept when the top 24 bits of
//              mix64(draw key + (offset + i) * golden) are >= p * 2^24, exact in integers.
// The mask is a pure function of (draw key, element index): counter-based, so there is
// no generator state to carry in a checkpoint (the module's step counter suffices),
// backward recomputes the mask instead of storing it, a tensor processed in slices
// (offset) gets the same mask as processed whole, and the CUDA kernel computes the very
// same integers, so CPU and GPU runs drop the same elements.
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/nn/layer.h"

namespace dpt {

uint64_t dropout_draw_key(uint64_t layer_key, uint64_t step, uint64_t stream);
// p * 2^24 rounded down: an element is dropped when its 24-bit draw is below it.
uint32_t dropout_threshold(float p);
// y[i] = x[i] * (kept(offset + i) ? 1/(1-p) : 0) for i < n; y may be x. Host memory.
void dropout_apply(const float* x, float* y, size_t n, float p, uint64_t draw_key, uint64_t offset = 0);
// The same on host or device pointers (gpu::dropout_apply on CUDA).
void dropout_apply_on(bool cuda, const float* x, float* y, size_t n, float p, uint64_t draw_key,
                      uint64_t offset = 0);

class Dropout : public Layer {
 public:
  Dropout(const std::string& name, float p);
  void init_params(ParamStore& store, uint64_t seed) override;
  void set_seed(uint64_t seed);
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }
  float p() const { return p_; }
  // Whether the last forward dropped anything, and its draw key (for fused users).
  bool active() const { return active_; }
  uint64_t draw_key() const { return draw_; }
  // Sets active()/draw_key() for a training step without running forward (layers that
  // apply the mask themselves, e.g. attention on each head's slice).
  bool begin(const ForwardContext& ctx);

 private:
  float p_;
  uint64_t key_ = 0;
  bool active_ = false;
  uint64_t draw_ = 0;
  Tensor y_, dx_;
};

}  // namespace dpt
