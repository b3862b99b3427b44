// What an optimizer (dpt/optim.h) steps through: a model in one process, or a
// data-parallel wrapper. Each refuses a step on gradients that were never averaged.
#pragma once

#include <cstdint>
#include <string>

#include "dpt/parameters.h"
#include "optim/optimizer.h"

struct dpt::ParameterSet::Owner {
  virtual ~Owner() = default;
  // Once per owner; `who` names the optimizer's constructor in errors.
  virtual void attach_optimizer(const std::string& name, const ::dpt::OptimizerConfig& config,
                                const std::string& who) = 0;
  virtual void zero_grad() = 0;
  virtual void step(float lr, const std::string& who) = 0;
  virtual int64_t step_count() const = 0;
};
