// The model zoo:
//   ToyModel  Linear(10,10) ReLU Linear(10,5), MSE (the PyTorch DDP tutorial model).
//   Mlp       Flatten, 784-256-128-10 with ReLU, softmax cross-entropy.
//   Cnn       [conv3x3(pad 1) ReLU maxpool2] x2, Flatten, Linear ReLU Linear, CE.
//   Gpt       token + position embedding, n_layer pre-norm blocks, final LayerNorm,
//             output head tied to the token embedding, CE over next-token targets.
//   ResNet18  torchvision's resnet18 (models/resnet.h).
// make_model("toy" | "mlp" | "cnn" | "gpt" | "resnet18", config) builds one by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "models/module.h"

namespace dpt {

class ToyModel : public Module {
 public:
  explicit ToyModel(const ModelConfig& cfg);
};

class Mlp : public Module {
 public:
  explicit Mlp(const ModelConfig& cfg);
};

class Cnn : public Module {
 public:
  explicit Cnn(const ModelConfig& cfg);
};

class Gpt : public Module {
 public:
  explicit Gpt(const ModelConfig& cfg);
  const ModelConfig& config() const { return cfg_; }

 private:
  ModelConfig cfg_;
};

std::unique_ptr<Module> make_model(const std::string& name, const ModelConfig& cfg);
std::vector<std::string> model_names();

}  // namespace dpt
