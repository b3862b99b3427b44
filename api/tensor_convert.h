// Copies between the public tensor (dpt/tensor.h: host float32) and the internal one
// (models/nn/tensor.h), at the public API's edges: inputs, outputs, loss gradients and
// custom layers' activations.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "dpt/tensor.h"
#include "models/nn/tensor.h"

namespace dpt {

inline void copy_into(const nn::Tensor& from, Tensor& to) {
  to.resize(from.shape());
  std::copy(from.data(), from.data() + from.numel(), to.data());
}
inline Tensor to_internal(const nn::Tensor& t) {
  Tensor out;
  copy_into(t, out);
  return out;
}
// A host copy (a CUDA tensor is downloaded).
inline nn::Tensor to_public(const Tensor& t) {
  if (t.on_cuda()) return to_public(t.to_host());
  return nn::Tensor(t.shape(), std::vector<float>(t.data(), t.data() + t.numel()));
}

}  // namespace dpt
