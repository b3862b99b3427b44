// dpt::nn::Model's state (dpt/nn.h): the internal module, the mode, the last output as a
// public tensor, and, in one process, the optimizer that steps it. A data-parallel
// wrapper marks the model as its own while it lives (the model's backward is then the
// wrapper's: calling the model's own is refused).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/parameter_owner.h"
#include "api/user_module.h"
#include "dpt/nn.h"

struct dpt::nn::Model::Impl : dpt::ParameterSet::Owner {
  std::unique_ptr<::dpt::UserModule> module;
  bool training = true;
  Tensor output;
  std::string wrapped_by;  // the wrapper's class name while one holds the model
  // Set by the wrapper: before the parameters are read (ZeRO's allgather of the updated
  // shards may still be on its way after a step: wait for it). Throws where they
  // cannot be read whole (ZeRO-3).
  std::function<void(const char* who)> before_read;
  void settle(const char* who) const {
    if (before_read) before_read(who);
  }
  std::unique_ptr<::dpt::Optimizer> optimizer;
  bool backward_since_step = false;

  // The model's forward and backward, for the model and its wrappers alike.
  const Tensor& run_forward(const Tensor& x, bool train, const char* who);
  void run_backward(const Loss& loss, const char* who);

  void attach_optimizer(const std::string& name, const ::dpt::OptimizerConfig& config, const std::string& who) override;
  void zero_grad() override { module->zero_grad(); }
  void step(float lr, const std::string& who) override;
  int64_t step_count() const override { return optimizer ? optimizer->step_count() : 0; }
};

namespace dpt {
// The internal module of a public model, for a trainer that takes it over (dpt::train_main).
std::unique_ptr<Module> take_module(nn::Model model);
}  // namespace dpt
