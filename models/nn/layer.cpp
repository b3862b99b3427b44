#include "models/nn/layer.h"

#include <stdexcept>

namespace dpt {

void GradSink::begin(const std::vector<int>& use_counts, Callback on_final) {
  pending_ = use_counts;
  on_final_ = std::move(on_final);
}

void GradSink::ready(size_t param_index) {
  if (param_index >= pending_.size() || pending_[param_index] <= 0)
    throw std::logic_error("gradient of parameter " + std::to_string(param_index) +
                           " announced more often than it is used");
  if (--pending_[param_index] == 0 && on_final_) on_final_(param_index);
}

bool GradSink::all_final() const {
  for (int p : pending_)
    if (p != 0) return false;
  return true;
}

}  // namespace dpt
