// The gpt2 model flags shared by train_local and train: a size by name, the shape
// pieces GPT-2 adds (vocabulary, positions), dropout and --init-from. The tools keep
// their own names for layers/heads/width and pass them in; models/zoo/gpt2.h resolves it all.
#pragma once

#include <boost/program_options.hpp>

#include <filesystem>
#include <optional>
#include <string>

#include "models/zoo/gpt2.h"
#include "models/nn/model_config.h"

namespace dpt::tools {

struct Gpt2Flags {
  std::string size, init_from;
};

inline void add_gpt2_options(boost::program_options::options_description& d, Gpt2Flags& f) {
  namespace po = boost::program_options;
  d.add_options()
    ("gpt2-size", po::value(&f.size), "gpt2: 124M | 355M | 774M | 1558M (or gpt2, gpt2-medium, gpt2-large, gpt2-xl; default 124M)")
    ("vocab", po::value<int64_t>(), "gpt2: vocabulary size (default 50257)")
    ("n-positions", po::value<int64_t>(), "gpt2: position table rows (default 1024)")
    ("dropout", po::value<float>(), "embedding, attention and residual dropout (default: 0.1 for gpt2, 0 for gpt)")
    ("init-from", po::value(&f.init_from), "start from this safetensors file: gpt2 reads Hugging Face GPT2LMHeadModel or GPT2Model names (F32, F16 or BF16); the other models read their own parameter and buffer names (a train or train_local checkpoint; resnet18: torchvision's state_dict names, see --num-classes)");
}

// Call after notify. layers/heads/width name the tool's own flags for those sizes.
// --init-from must name a file; for models other than gpt2 the tool loads it into the
// built model itself (train/init_from.h).
inline void apply_model_flags(const std::string& model, const boost::program_options::variables_map& vm,
                              const Gpt2Flags& f, const char* layers, const char* heads, const char* width,
                              ModelConfig& cfg) {
  auto given = [&](const char* name) -> std::optional<int64_t> {
    if (!vm.count(name) || vm[name].defaulted()) return std::nullopt;
    return vm[name].as<int64_t>();
  };
  if (vm.count("dropout")) cfg.dropout = vm["dropout"].as<float>();
  if (!f.init_from.empty() && !std::filesystem::is_regular_file(f.init_from))
    throw std::invalid_argument("--init-from '" + f.init_from + "': no such file (a .safetensors file)");
  if (model != "gpt2") {
    for (const char* flag : {"gpt2-size", "vocab", "n-positions"})
      if (vm.count(flag)) throw std::invalid_argument(std::string("--") + flag + " applies to --model gpt2 only");
    return;
  }
  if (!vm.count("dropout")) cfg.dropout = kGpt2Dropout;
  Gpt2Request r;
  r.size = f.size;
  r.init_from = f.init_from;
  r.layers = given(layers);
  r.heads = given(heads);
  r.width = given(width);
  r.vocab = given("vocab");
  r.positions = given("n-positions");
  configure_gpt2(r, cfg);
}

}  // namespace dpt::tools
