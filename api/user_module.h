// The internal Module a public dpt::nn::Model (dpt/nn.h) is: its top-level named layers
// built from their descriptions, the sample shape learned from the first forward, the
// loss a trainer computes for it chosen by name.
#pragma once

#include <memory>
#include <string>

#include "dpt/nn.h"
#include "models/nn/module.h"

namespace dpt {

class UserModule : public Module {
 public:
  // resident_rank/world: ZeRO-3's sharded build (models/nn/param_store.h); 0: whole.
  UserModule(const nn::Sequential& net, const nn::ModelOptions& options, int resident_rank = 0,
             int resident_world = 0);
};

// "cross_entropy" or "mse" (std::invalid_argument naming the valid ones).
std::unique_ptr<Loss> make_loss(const std::string& name);

}  // namespace dpt
