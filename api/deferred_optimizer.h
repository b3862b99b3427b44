// The optimizer a wrapper's strategy is built with before the user made one: PyTorch's
// order is model, then DDP(model), then optim.SGD(ddp.parameters()), while a strategy
// takes its optimizer (sized for what it owns: the whole buffer, or a ZeRO shard) when it
// is built. This stands in and forwards to the real one once the user's optimizer
// attaches (set); a step before that is refused.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "optim/optimizer.h"

namespace dpt {

class DeferredOptimizer : public Optimizer {
 public:
  explicit DeferredOptimizer(size_t numel) : Optimizer(numel) {}
  void set(std::unique_ptr<Optimizer> real) { real_ = std::move(real); }
  bool attached() const { return real_ != nullptr; }
  void step(std::span<float> params, std::span<const float> grads, float lr) override {
    if (!real_) throw std::logic_error("no optimizer: make one over the wrapper's parameters() before stepping");
    real_->set_step_count(step_count_);  // a restore sets the count here
    real_->step(params, grads, lr);
    step_count_ = real_->step_count();
  }
  std::string name() const override { return real_ ? real_->name() : "none"; }

 protected:
  std::vector<std::pair<std::string, std::span<float>>> host_state() override {
    return real_ ? real_->state_buffers() : std::vector<std::pair<std::string, std::span<float>>>{};
  }

 private:
  std::unique_ptr<Optimizer> real_;
};

}  // namespace dpt
