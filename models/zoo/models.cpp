#include "models/zoo/models.h"

#include <stdexcept>

#include "models/nn/layers/activations.h"
#include "models/io/gpt2_weights.h"
#include "models/nn/layers/conv2d.h"
#include "models/nn/layers/dropout.h"
#include "models/nn/layers/embedding.h"
#include "models/nn/layers/gpt_block.h"
#include "models/nn/layers/layer_norm.h"
#include "models/nn/layers/linear.h"
#include "models/nn/layers/shape_layers.h"
#include "models/zoo/resnet.h"

namespace dpt {

ToyModel::ToyModel(const ModelConfig& cfg) : Module("toy", cfg, {10}, false) {
  add_layer<Linear>(store_, "net1", 10, 10);
  add_layer<Relu>("relu");
  add_layer<Linear>(store_, "net2", 10, 5);
  finalize(std::make_unique<MseLoss>());
}

Mlp::Mlp(const ModelConfig& cfg)
    : Module("mlp", cfg, {cfg.in_channels, cfg.image_h, cfg.image_w}, false) {
  add_layer<Flatten>("flatten");
  add_layer<Linear>(store_, "fc1", cfg.in_channels * cfg.image_h * cfg.image_w, 256);
  add_layer<Relu>("relu1");
  add_layer<Linear>(store_, "fc2", 256, 128);
  add_layer<Relu>("relu2");
  add_layer<Linear>(store_, "fc3", 128, cfg.num_classes);
  finalize(std::make_unique<SoftmaxCrossEntropy>());
}

Cnn::Cnn(const ModelConfig& cfg)
    : Module("cnn", cfg, {cfg.in_channels, cfg.image_h, cfg.image_w}, false) {
  add_layer<Conv2d>(store_, "conv1", cfg.in_channels, cfg.cnn_c1, 3, 1, 1);
  add_layer<Relu>("relu1");
  add_layer<MaxPool2d>("pool1", 2);
  add_layer<Conv2d>(store_, "conv2", cfg.cnn_c1, cfg.cnn_c2, 3, 1, 1);
  add_layer<Relu>("relu2");
  add_layer<MaxPool2d>("pool2", 2);
  add_layer<Flatten>("flatten");
  add_layer<Linear>(store_, "fc1", cfg.cnn_c2 * (cfg.image_h / 4) * (cfg.image_w / 4),
                    cfg.cnn_hidden);
  add_layer<Relu>("relu3");
  add_layer<Linear>(store_, "fc2", cfg.cnn_hidden, cfg.num_classes);
  finalize(std::make_unique<SoftmaxCrossEntropy>());
}

Gpt::Gpt(const ModelConfig& cfg, Flavor flavor)
    : Module(flavor == Flavor::kGpt2 ? "gpt2" : "gpt", cfg, {cfg.seq_len}, true), cfg_(cfg) {
  const bool hf = flavor == Flavor::kGpt2;
  const int64_t positions = cfg.n_positions > 0 ? cfg.n_positions : cfg.seq_len;
  if (cfg.seq_len > positions)
    throw std::invalid_argument(name() + ": sequence length " + std::to_string(cfg.seq_len) + " exceeds the " +
                                std::to_string(positions) + " positions of the model");
  const std::string prefix = hf ? "transformer." : "";
  auto& emb = add_layer<Embedding>(store_, prefix + (hf ? "wte" : "tok_emb"), cfg.vocab, cfg.d_model,
                                   prefix + (hf ? "wpe" : "pos_emb"), positions, hf ? 0.02f : 0.01f);
  if (cfg.dropout > 0.0f) add_layer<Dropout>(prefix + "drop", cfg.dropout);
  GptBlockSpec spec;
  spec.dim = cfg.d_model;
  spec.heads = cfg.n_head;
  spec.n_layer = cfg.n_layer;
  spec.dropout = cfg.dropout;
  spec.ln_eps = cfg.layer_norm_eps;
  spec.hf_names = hf;
  for (int64_t i = 0; i < cfg.n_layer; ++i)
    add_layer<GptBlock>(store_, prefix + (hf ? "h." : "blocks.") + std::to_string(i), spec);
  add_layer<LayerNorm>(store_, prefix + "ln_f", cfg.d_model, cfg.layer_norm_eps);
  add_layer<TiedHead>(store_, "lm_head", emb.token_table(), cfg.vocab, cfg.d_model);
  finalize(std::make_unique<SoftmaxCrossEntropy>());
}

std::vector<std::string> model_names() { return {"toy", "mlp", "cnn", "gpt", "gpt2", "resnet18"}; }

std::unique_ptr<Module> make_model(const std::string& name, const ModelConfig& cfg) {
  if (!cfg.init_from.empty() && name != "gpt2")
    throw std::invalid_argument("init_from '" + cfg.init_from + "': only the gpt2 model loads Hugging Face weights, not " +
                                name);
  if (name == "toy") return std::make_unique<ToyModel>(cfg);
  if (name == "mlp") return std::make_unique<Mlp>(cfg);
  if (name == "cnn") return std::make_unique<Cnn>(cfg);
  if (name == "gpt") return std::make_unique<Gpt>(cfg);
  if (name == "gpt2") {
    auto model = std::make_unique<Gpt>(cfg, Gpt::Flavor::kGpt2);
    if (!cfg.init_from.empty()) load_gpt2_weights(cfg.init_from, *model);
    return model;
  }
  if (name == "resnet18") return std::make_unique<ResNet18>(cfg);
  throw std::invalid_argument("unknown model '" + name + "' (valid: toy, mlp, cnn, gpt, gpt2, resnet18)");
}

}  // namespace dpt
