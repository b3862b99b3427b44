// The model zoo:
//   ToyModel  Linear(10,10) ReLU Linear(10,5), MSE (the PyTorch DDP tutorial model).
//   Mlp       Flatten, 784-256-128-10 with ReLU, softmax cross-entropy.
//   Cnn       [conv3x3(pad 1) ReLU maxpool2] x2, Flatten, Linear ReLU Linear, CE.
//   Gpt       token + position embedding (+ dropout), n_layer pre-norm blocks, final
//             LayerNorm, output head tied to the token embedding, CE over next-token
//             targets. Two flavours of the same layers (models/nn/layers/gpt_spec.h):
//     gpt     byte-level: our names (tok_emb, pos_emb, blocks.N.*, ln_f), [out, in]
//             weights, seq_len positions, position table N(0, 0.01).
//     gpt2    Hugging Face's GPT2LMHeadModel: its names (transformer.wte, .wpe, .h.N.*,
//             .ln_f), Conv1D [in, out] weights, n_positions positions, N(0, 0.02)
//             embeddings; sizes by name in models/zoo/gpt2.h, weights in/out in
//             models/io/gpt2_weights.h.
//   ResNet18  torchvision's resnet18 (models/zoo/resnet.h).
// make_model("toy" | "mlp" | "cnn" | "gpt" | "gpt2" | "resnet18", config) builds one by name; a gpt2
// with config.init_from set is loaded from that file (load_gpt2_weights).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/nn/model_config.h"
#include "models/nn/module.h"

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
  enum class Flavor { kByteLevel, kGpt2 };
  explicit Gpt(const ModelConfig& cfg, Flavor flavor = Flavor::kByteLevel);
  const ModelConfig& config() const { return cfg_; }

 private:
  ModelConfig cfg_;
};

std::unique_ptr<Module> make_model(const std::string& name, const ModelConfig& cfg);
std::vector<std::string> model_names();

}  // namespace dpt
