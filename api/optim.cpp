#include "dpt/optim.h"

#include <stdexcept>

#include "api/parameter_owner.h"

namespace dpt::optim {

struct Optimizer::Config {
  ::dpt::OptimizerConfig value;
};

namespace {
std::string class_name(const std::string& name) {
  return "dpt::optim::" + std::string(name == "sgd" ? "SGD" : name == "adam" ? "Adam" : "AdamW");
}
}  // namespace

Optimizer::Optimizer(ParameterSet params, std::string name, const Config& config, float lr)
    : params_(params), name_(std::move(name)), lr_(lr) {
  const std::string who = class_name(name_);
  if (!params_.owner()) throw std::invalid_argument(who + ": an empty ParameterSet");
  if (!(lr >= 0.0f)) throw std::invalid_argument(who + ": learning rate " + std::to_string(lr) + " (must be >= 0)");
  // make_optimizer checks the hyperparameters as torch does (its message names the field).
  params_.owner()->attach_optimizer(name_, config.value, who);
}

Optimizer::~Optimizer() = default;

void Optimizer::zero_grad() { params_.owner()->zero_grad(); }
void Optimizer::step() { params_.owner()->step(lr_, class_name(name_) + "::step()"); }
int64_t Optimizer::step_count() const { return params_.owner()->step_count(); }

SGD::SGD(ParameterSet params, const SGDOptions& o)
    : Optimizer(params, "sgd",
                [&] {
                  Config c;
                  c.value.momentum = o.momentum;
                  c.value.dampening = o.dampening;
                  c.value.nesterov = o.nesterov;
                  c.value.weight_decay = o.weight_decay;
                  return c;
                }(),
                o.lr) {}

namespace {
::dpt::OptimizerConfig adam_config(const AdamOptions& o) {
  ::dpt::OptimizerConfig c;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  c.eps = o.eps;
  c.weight_decay = o.weight_decay;
  return c;
}
}  // namespace

Adam::Adam(ParameterSet params, const AdamOptions& o)
    : Optimizer(params, "adam", Config{adam_config(o)}, o.lr) {}
AdamW::AdamW(ParameterSet params, const AdamOptions& o)
    : Optimizer(params, "adamw", Config{adam_config(o)}, o.lr) {}

}  // namespace dpt::optim
