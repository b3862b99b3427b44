#include <stdexcept>
#include <string>

#include "optim/adam.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"

namespace dpt {

std::unique_ptr<Optimizer> make_optimizer(std::string_view name, const OptimizerConfig& c,
                                          size_t numel) {
  if (name == "sgd") {
    return std::make_unique<Sgd>(numel, c.momentum, c.dampening, c.nesterov, c.weight_decay);
  }
  if (name == "adam") return std::make_unique<Adam>(numel, c.beta1, c.beta2, c.eps, c.weight_decay);
  if (name == "adamw")
    return std::make_unique<AdamW>(numel, c.beta1, c.beta2, c.eps, c.weight_decay);
  throw std::invalid_argument("unknown optimizer '" + std::string(name) +
                              "' (valid: sgd, adam, adamw)");
}

}  // namespace dpt
