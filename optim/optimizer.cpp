#include "optim/optimizer.h"

#include <stdexcept>

namespace dpt {

Optimizer::~Optimizer() = default;

std::vector<std::pair<std::string, std::span<float>>> Optimizer::state_buffers() { return {}; }

void Optimizer::check_sizes(std::span<const float> params, std::span<const float> grads) const {
  if (params.size() != numel_ || grads.size() != numel_) {
    throw std::invalid_argument(name() + ".step: optimizer owns " + std::to_string(numel_) +
                                " elements but got " + std::to_string(params.size()) +
                                " parameters and " + std::to_string(grads.size()) + " gradients");
  }
}

}  // namespace dpt
