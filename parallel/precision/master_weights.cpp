#include "parallel/precision/master_weights.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "parallel/precision/wire16.h"

namespace dpt {

MasterWeights::MasterWeights(DType working) : working_(working) { check_wire16(working, "mixed precision"); }

void MasterWeights::round_working(std::span<float> x) const { round16(working_, x); }

void MasterWeights::adopt(std::span<float> working) {
  master_.assign(working.begin(), working.end());
  round_working(working);
}

void MasterWeights::check(std::span<const float> working) const {
  if (working.size() != master_.size())
    throw std::logic_error("mixed precision: the working slice has " + std::to_string(working.size()) +
                           " elements, the master " + std::to_string(master_.size()));
}

void MasterWeights::step(Optimizer& optimizer, std::span<float> working, std::span<const float> grads, float lr) {
  check(working);
  optimizer.step(master_, grads, lr);
  std::copy(master_.begin(), master_.end(), working.begin());
  round_working(working);
}

void MasterWeights::expose(std::span<float> working) const {
  check(working);
  std::copy(master_.begin(), master_.end(), working.begin());
}

}  // namespace dpt
