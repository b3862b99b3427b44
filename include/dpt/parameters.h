// dpt::ParameterSet: the parameters an optimizer steps, as PyTorch's
// `model.parameters()`: from a model in one process (nn::Model::parameters) or from a
// data-parallel wrapper (DistributedDataParallel::parameters and the others, dpt/parallel.h),
// which then steps through the wrapper: its averaged gradients, its shards.
#pragma once

namespace dpt {

class ParameterSet {
 public:
  struct Owner;  // the model or the wrapper (the library's side)
  explicit ParameterSet(Owner* owner) : owner_(owner) {}
  Owner* owner() const { return owner_; }

 private:
  Owner* owner_;
};

}  // namespace dpt
