// The model flags shared by train and train_local (one name per concept): which model,
// its initialization seed, the shape of gpt/gpt2 (--seq-len --gpt-layers --gpt-heads
// --gpt-dim), of the cnn and of resnet18 (and its head's --num-classes), and the gpt2
// flags (gpt2_flags.h). Each program sets its defaults in the ModelConfig before adding
// the flags; --help shows them.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "models/nn/model_config.h"
#include "api/cli/cli.h"
#include "api/cli/gpt2_flags.h"

namespace dpt::tools {

struct ModelFlags {
  Gpt2Flags gpt2;
  int64_t num_classes = 0;  // --num-classes; 0: not given (the dataset's count)
};

inline void add_model_options(boost::program_options::options_description& d, std::string& model, ModelConfig& m,
                              ModelFlags& f) {
  namespace po = boost::program_options;
  po::options_description g("model");
  g.add_options()
    ("model", po::value(&model)->default_value(model), "toy | mlp | cnn | gpt | gpt2 | resnet18")
    ("model-seed", po::value(&m.seed)->default_value(m.seed), "parameter initialization seed")
    ("seq-len", po::value(&m.seq_len)->default_value(m.seq_len), "gpt, gpt2: context length in tokens: BPE tokens for gpt2 (text-docs), bytes for gpt and on --dataset text")
    ("gpt-layers", po::value(&m.n_layer)->default_value(m.n_layer), "gpt, gpt2: transformer blocks")
    ("gpt-dim", po::value(&m.d_model)->default_value(m.d_model), "gpt, gpt2: model width")
    ("gpt-heads", po::value(&m.n_head)->default_value(m.n_head), "gpt, gpt2: attention heads")
    ("cnn-c1", po::value(&m.cnn_c1)->default_value(m.cnn_c1), "cnn: first conv channels")
    ("cnn-c2", po::value(&m.cnn_c2)->default_value(m.cnn_c2), "cnn: second conv channels")
    ("cnn-hidden", po::value(&m.cnn_hidden)->default_value(m.cnn_hidden), "cnn: hidden units")
    ("resnet-stem", po::value(&m.resnet_stem)->default_value(m.resnet_stem), "resnet18: imagenet (torchvision's 7x7/2 conv + max-pool) or cifar (3x3/1 conv, no max-pool)")
    ("num-classes", po::value(&f.num_classes), "resnet18: classes of the fc head (default: the dataset's); with an --init-from file whose head has another count (ImageNet's 1000), that head is replaced by a freshly initialised one (--model-seed) and the rest loaded");
  add_gpt2_options(g, f.gpt2);
  d.add(g);
}

// train_local's old names, kept as hidden aliases.
inline void add_model_aliases(Cli& cli) {
  cli.alias("n-layer", "gpt-layers");
  cli.alias("n-head", "gpt-heads");
  cli.alias("d-model", "gpt-dim");
}

// Call after notify (gpt2_flags.h: apply_model_flags). The tool passes f.num_classes
// and, for models other than gpt2, f.gpt2.init_from to its trainer (train/init_from.h).
inline void apply_model_options(const std::string& model, const boost::program_options::variables_map& vm,
                                const ModelFlags& f, ModelConfig& m) {
  if (vm.count("num-classes")) {
    if (model != "resnet18")
      throw std::invalid_argument("--num-classes applies to --model resnet18 only (the fc head it sizes), not " + model);
    if (f.num_classes < 1)
      throw std::invalid_argument("--num-classes " + std::to_string(f.num_classes) + ": must be at least 1");
  }
  apply_model_flags(model, vm, f.gpt2, "gpt-layers", "gpt-heads", "gpt-dim", m);
}

}  // namespace dpt::tools
