#pragma once
// Stochastic gradient descent exactly as torch.optim.SGD (maximize=False). Per element,
// with g the gradient, p the parameter, b the momentum buffer, mu the momentum:
//   d = g + weight_decay * p                       (if weight_decay != 0)
//   b = d                   on the first step,
//   b = mu * b + (1 - dampening) * d   after       (if mu != 0)
//   d = d + mu * b  (nesterov)  or  d = b          (if mu != 0)
//   p = p - lr * d
#include <vector>

#include "optim/optimizer.h"

namespace dpt {

class Sgd : public Optimizer {
 public:
  Sgd(size_t numel, float momentum = 0.0f, float dampening = 0.0f, bool nesterov = false,
      float weight_decay = 0.0f);
  void step(std::span<float> params, std::span<const float> grads, float lr) override;
  std::string name() const override { return "sgd"; }
  bool has_device_step() const override { return true; }

 protected:
  // {"momentum_buffer"} when momentum != 0, else nothing.
  std::vector<std::pair<std::string, std::span<float>>> host_state() override;
  void device_step(float* params, const float* grads, float lr, const std::vector<float*>& state) override;

 private:
  float momentum_, dampening_;
  bool nesterov_;
  float weight_decay_;
  std::vector<float> momentum_buffer_;
};

}  // namespace dpt
