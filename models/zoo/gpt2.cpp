#include "models/zoo/gpt2.h"

#include <algorithm>
#include <stdexcept>

#include "models/io/gpt2_weights.h"

namespace dpt {

const std::vector<Gpt2Size>& gpt2_sizes() {
  static const std::vector<Gpt2Size> kSizes{{"124M", "gpt2", 12, 12, 768},
                                            {"355M", "gpt2-medium", 24, 16, 1024},
                                            {"774M", "gpt2-large", 36, 20, 1280},
                                            {"1558M", "gpt2-xl", 48, 25, 1600}};
  return kSizes;
}

const Gpt2Size& gpt2_size(const std::string& name) {
  std::string valid;
  for (const auto& s : gpt2_sizes()) {
    if (name == s.name || name == s.hf_name) return s;
    valid += std::string(valid.empty() ? "" : ", ") + s.name + " (" + s.hf_name + ")";
  }
  throw std::invalid_argument("--gpt2-size '" + name + "': valid sizes are " + valid);
}

void configure_gpt2(const Gpt2Request& req, ModelConfig& cfg) {
  // Heads are not a shape the file can tell, so giving them keeps rule 2.
  const bool shape_flag = req.layers || req.width || req.vocab || req.positions;
  cfg.vocab = kGpt2Vocab;
  cfg.n_positions = kGpt2Positions;
  if (!req.init_from.empty() && req.size.empty() && !shape_flag) {
    const Gpt2FileShape f = read_gpt2_file_shape(req.init_from);
    int64_t heads = req.heads ? *req.heads : f.heads;
    for (const auto& s : gpt2_sizes())
      if (heads == 0 && s.width == f.width) heads = s.heads;
    if (heads == 0)
      throw std::invalid_argument("--init-from " + req.init_from + ": width " + std::to_string(f.width) +
                                  " is no GPT-2 size and no config.json beside the file gives n_head: pass the head count");
    cfg.n_layer = f.layers;
    cfg.d_model = f.width;
    cfg.n_head = heads;
    cfg.vocab = f.vocab;
    cfg.n_positions = f.positions;
  } else {
    const Gpt2Size& s = gpt2_size(req.size.empty() ? "124M" : req.size);
    cfg.n_layer = s.layers;
    cfg.n_head = s.heads;
    cfg.d_model = s.width;
  }
  if (req.layers) cfg.n_layer = *req.layers;
  if (req.heads) cfg.n_head = *req.heads;
  if (req.width) cfg.d_model = *req.width;
  if (req.vocab) cfg.vocab = *req.vocab;
  if (req.positions) cfg.n_positions = *req.positions;
  cfg.init_from = req.init_from;
  if (cfg.n_layer < 1 || cfg.d_model < 1 || cfg.n_head < 1 || cfg.vocab < 1 || cfg.n_positions < 1)
    throw std::invalid_argument("gpt2: layers, width, heads, vocab and positions must be positive (got " +
                                std::to_string(cfg.n_layer) + ", " + std::to_string(cfg.d_model) + ", " +
                                std::to_string(cfg.n_head) + ", " + std::to_string(cfg.vocab) + ", " +
                                std::to_string(cfg.n_positions) + ")");
  if (cfg.d_model % cfg.n_head != 0)
    throw std::invalid_argument("gpt2: width " + std::to_string(cfg.d_model) + " is not divisible by " +
                                std::to_string(cfg.n_head) + " heads");
}

int64_t gpt2_param_count(const ModelConfig& cfg) {
  const int64_t d = cfg.d_model;
  const int64_t positions = cfg.n_positions > 0 ? cfg.n_positions : cfg.seq_len;
  const int64_t block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d);
  return cfg.vocab * d + positions * d + cfg.n_layer * block + 2 * d;
}

int64_t gpt2_largest_layer_params(const ModelConfig& cfg) {
  const int64_t d = cfg.d_model;
  const int64_t positions = cfg.n_positions > 0 ? cfg.n_positions : cfg.seq_len;
  const int64_t block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d);
  return std::max(cfg.vocab * d + positions * d, block);
}

double gpt2_activation_bytes(const ModelConfig& cfg, int64_t batch) {
  const double s = double(cfg.seq_len), b = double(batch), h = double(cfg.d_model), a = double(cfg.n_head);
  const double per_block = 4 * (44 * s * b * h + 2 * a * s * s * b);  // fitted (gpt2.h)
  // The logits once: the loss writes their gradient over them (Module::loss).
  return double(cfg.n_layer) * per_block + 4 * b * s * double(cfg.vocab) + 4 * b * s * h;
}

}  // namespace dpt
