// Dropout: in training, zero each element with probability p and scale the rest by
// 1/(1-p) (inverted dropout, as PyTorch); identity in evaluation. The mask comes
// from a seeded xoshiro256** generator whose state advances every training forward,
// so a run is reproducible from its seed; state() / set_state() let a checkpoint
// carry it.
#pragma once

#include <array>

#include "models/layer.h"

namespace dpt {

class Dropout : public Layer {
 public:
  Dropout(const std::string& name, float p, uint64_t seed);
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  std::array<uint64_t, 4> state() const { return rng_; }
  void set_state(const std::array<uint64_t, 4>& s) { rng_ = s; }

 private:
  uint64_t next();
  float p_;
  std::array<uint64_t, 4> rng_{};
  bool active_ = false;  // whether the last forward applied a mask
  Tensor mask_, y_, dx_;  // mask_ holds 0 or 1/(1-p)
};

}  // namespace dpt
