// dpt::optim: SGD, Adam and AdamW as in torch.optim, over a ParameterSet:
//
//   dpt::optim::SGD optimizer(ddp.parameters(), {.lr = 0.001f});
//   optimizer.zero_grad(); ...forward, loss, backward...; optimizer.step();
//
// Over a data-parallel wrapper the step is the wrapper's (DDP: every rank the whole
// buffer; ZeRO: each rank its shard, then the parameters gathered). step() refuses
// gradients that were never averaged: no backward since the last step (stepping twice),
// or a last backward inside no_sync(). Each refusal is std::logic_error naming the call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dpt/parameters.h"

namespace dpt::optim {

struct SGDOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  bool nesterov = false;
  float weight_decay = 0.0f;
};

struct AdamOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // Adam: L2 on the gradient; AdamW: decoupled (torch's default there is 0.01)
};

class Optimizer {
 public:
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer();

  void zero_grad();
  void step();
  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }  // a schedule sets it before each step
  int64_t step_count() const;
  const std::string& name() const { return name_; }

 protected:
  struct Config;
  Optimizer(ParameterSet params, std::string name, const Config& config, float lr);

 private:
  ParameterSet params_;
  std::string name_;
  float lr_;
};

class SGD : public Optimizer {
 public:
  SGD(ParameterSet params, const SGDOptions& options);
};
class Adam : public Optimizer {
 public:
  Adam(ParameterSet params, const AdamOptions& options);
};
class AdamW : public Optimizer {
 public:
  AdamW(ParameterSet params, const AdamOptions& options);
};

}  // namespace dpt::optim
