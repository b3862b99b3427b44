#include "models/io/gpt2_weights.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "device/safe_file.h"
#include "models/io/checkpoint.h"
#include "models/nn/module.h"
#include "models/io/safetensors_file.h"

namespace dpt {
namespace fs = std::filesystem;
namespace {

const std::string kPrefix = "transformer.";
const std::string kHead = "lm_head.weight";
const std::string kTokens = "transformer.wte.weight";

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// "h.<N>.<rest>" -> N, else -1.
int64_t block_index(const std::string& base) {
  if (!starts_with(base, "h.")) return -1;
  const size_t dot = base.find('.', 2);
  if (dot == std::string::npos || dot == 2) return -1;
  int64_t n = 0;
  for (size_t i = 2; i < dot; ++i) {
    if (base[i] < '0' || base[i] > '9' || n > (int64_t{1} << 40)) return -1;
    n = n * 10 + (base[i] - '0');
  }
  return n;
}

// n_head from DIR/config.json beside the weights, 0 when there is none.
int64_t heads_from_config_beside(const std::string& path) {
  const fs::path config = fs::path(path).parent_path() / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(config, ec)) return 0;
  std::ifstream in(config);
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (!j.contains("n_head")) return 0;
    const int64_t h = j.at("n_head").get<int64_t>();
    if (h < 1) throw std::invalid_argument("n_head " + std::to_string(h));
    return h;
  } catch (const std::exception& e) {
    throw CheckpointError(config.string(), std::string("cannot read n_head: ") + e.what());
  }
}

// A float as the double with the same shortest decimal (0.1f -> 0.1, not 0.100000001),
// so config.json reads as a person (and Python) would write it.
double json_number(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

}  // namespace

std::optional<std::string> hf_to_gpt2_name(const std::string& hf_name) {
  if (hf_name == kHead) return hf_name;
  const std::string base = starts_with(hf_name, kPrefix) ? hf_name.substr(kPrefix.size()) : hf_name;
  if (block_index(base) >= 0 && (ends_with(base, ".attn.bias") || ends_with(base, ".attn.masked_bias")))
    return std::nullopt;  // causal-mask buffers, not parameters
  return kPrefix + base;
}

std::string gpt2_to_hf_name(const std::string& name) { return name; }

namespace {

// The layer count read from tensor names sizes the model before a byte of it is loaded,
// so it must be one the file can fill: blocks h.0 .. h.<L-1> without a gap (L is at most
// the number of tensors), and tensors of those blocks holding at least L blocks of
// weights at the width wte gives (12*d*d + 13*d values a block, 2 bytes or more each:
// the strict load needs every one of them). A few-KiB file naming block 2^40 - 1 with
// zero-byte tensors is refused here, not after asking for terabytes.
void check_gpt2_blocks(const std::string& path, const Gpt2FileShape& s, size_t distinct_blocks,
                       const std::string& highest, uint64_t block_bytes) {
  if (uint64_t(s.layers) != distinct_blocks)
    throw CheckpointError(path, "tensor " + highest + " names block " + std::to_string(s.layers - 1) +
                                    ", but the file holds tensors of " + std::to_string(distinct_blocks) +
                                    " blocks; GPT-2's blocks are h.0 to h.<layers-1> without a gap");
  const uint64_t d = uint64_t(s.width), layers = uint64_t(s.layers);
  uint64_t per_block = 0, need = 0;
  const bool fits = !__builtin_mul_overflow(d, d, &per_block) && !__builtin_mul_overflow(per_block, 12, &per_block) &&
                    !__builtin_add_overflow(per_block, 13 * d, &per_block) &&
                    !__builtin_mul_overflow(per_block, layers, &need) && !__builtin_mul_overflow(need, 2, &need);
  if (!fits || need > block_bytes)
    throw CheckpointError(path, std::to_string(layers) + " blocks (the highest named by " + highest + ") of width " +
                                    std::to_string(d) + " need " +
                                    (fits ? "at least " + std::to_string(need) : std::string("more than 2^64")) +
                                    " bytes of weights (12*width^2 + 13*width values a block, 2 bytes or more "
                                    "each), but the file's block tensors hold " + std::to_string(block_bytes));
}

}  // namespace

Gpt2FileShape read_gpt2_file_shape(const std::string& path) {
  const SafetensorsFile file(path);
  Gpt2FileShape s;
  std::set<int64_t> blocks;
  std::string highest;     // the tensor naming the highest block
  uint64_t block_bytes = 0;  // what the blocks' tensors hold (they tile the file: no overflow)
  for (const auto& e : file.index().entries) {
    const auto name = hf_to_gpt2_name(e.name);
    if (!name) continue;
    if (*name == kTokens && e.shape.size() == 2) s.vocab = e.shape[0], s.width = e.shape[1];
    if (*name == "transformer.wpe.weight" && e.shape.size() == 2) s.positions = e.shape[0];
    const int64_t block = block_index(name->substr(kPrefix.size()));
    if (block < 0) continue;
    blocks.insert(block);
    block_bytes += e.end - e.begin;
    if (block + 1 > s.layers) s.layers = block + 1, highest = e.name;
  }
  if (s.vocab == 0 || s.positions == 0)
    throw CheckpointError(path, "no GPT-2 embeddings: wte.weight and wpe.weight [rows, width] (with or without "
                                "the 'transformer.' prefix) are missing or not 2-D");
  check_gpt2_blocks(path, s, blocks.size(), highest, block_bytes);
  s.heads = heads_from_config_beside(path);
  return s;
}

void load_gpt2_weights(const std::string& path, const std::vector<ParamInfo>& infos, std::span<float> flat,
                       const std::function<void(size_t)>& on_loaded) {
  const SafetensorsFile file(path);
  std::map<std::string, const SafetensorsEntry*> by_name;  // our name -> the file's tensor
  std::map<std::string, const ParamInfo*> params;
  for (const auto& p : infos) params[p.name] = &p;
  const SafetensorsEntry* head = nullptr;
  std::string unexpected;
  for (const auto& e : file.index().entries) {
    const auto name = hf_to_gpt2_name(e.name);
    if (!name) continue;
    if (*name == kHead) {
      head = &e;
      continue;
    }
    if (!params.count(*name)) {
      if (unexpected.empty()) unexpected = e.name + " " + shape_str(e.shape);
      continue;
    }
    auto [it, fresh] = by_name.emplace(*name, &e);
    if (!fresh)
      throw CheckpointError(path, "tensor " + *name + " is in the file twice, as " + it->second->name + " and " +
                                      e.name);
  }
  // Every check before the first copy: a refused file leaves the parameters untouched.
  for (const auto& p : infos) {
    auto it = by_name.find(p.name);
    if (it == by_name.end())
      throw CheckpointError(path, "missing tensor " + p.name + " " + shape_str(p.shape) + " (looked for '" + p.name +
                                      "' and '" + p.name.substr(kPrefix.size()) + "')");
    if (it->second->shape != p.shape)
      throw CheckpointError(path, "tensor " + it->second->name + " has shape " + shape_str(it->second->shape) +
                                      " in the file but the model's " + p.name + " is " + shape_str(p.shape));
    if (p.offset + p.numel > flat.size())
      throw std::invalid_argument("load_gpt2_weights: flat buffer too small for " + p.name);
  }
  if (!unexpected.empty())
    throw CheckpointError(path, "unexpected tensor " + unexpected + ": not a parameter of this gpt2 (" +
                                    std::to_string(infos.size()) + " parameters; a different layer count?)");
  const ParamInfo* tokens = params.count(kTokens) ? params[kTokens] : nullptr;
  if (head && (!tokens || head->shape != tokens->shape))
    throw CheckpointError(path, "tensor lm_head.weight has shape " + shape_str(head->shape) +
                                    " but the tied token embedding is " +
                                    (tokens ? shape_str(tokens->shape) : std::string("absent")));
  if (head) {
    // GPT-2's head is the token embedding itself; a file whose head differs is another
    // model, which this one cannot represent. (Nothing is kept from it.) Compared in
    // scratch copies, so a refused file leaves the parameters untouched.
    std::vector<float> h(head->numel()), wte(tokens->numel);
    file.read(*head, h);
    file.read(*by_name.at(kTokens), wte);
    const auto diff = std::mismatch(h.begin(), h.end(), wte.begin(),
                                    [](float a, float b) { return a == b || (a != a && b != b); });
    if (diff.first != h.end()) {
      const size_t i = static_cast<size_t>(diff.first - h.begin());
      throw CheckpointError(path, "lm_head.weight differs from the token embedding " +
                                      by_name.at(kTokens)->name + " (first at element " + std::to_string(i) + ": " +
                                      std::to_string(h[i]) + " vs " + std::to_string(wte[i]) +
                                      "): GPT-2's output head is tied to the embedding, this file's is not");
    }
  }
  for (const auto& p : infos) {
    file.read(*by_name.at(p.name), flat.subspan(p.offset, p.numel));
    if (on_loaded) on_loaded(p.index);
  }
}

void load_gpt2_weights(const std::string& path, Module& model) {
  if (model.name() != "gpt2")
    throw std::invalid_argument("load_gpt2_weights: model is " + model.name() + ", not gpt2");
  ParamStore& store = model.store();
  load_gpt2_weights(path, model.param_infos(), model.flat_params(), [&](size_t index) { store.seal(index); });
}

std::string gpt2_config_json(const ModelConfig& cfg) {
  // GPT2Config's keys with the values of this model (n_ctx: the legacy alias of
  // n_positions that the published configs carry). The special token is GPT-2's
  // <|endoftext|> (50256) when the vocabulary has it, else the last id.
  const int64_t positions = cfg.n_positions > 0 ? cfg.n_positions : cfg.seq_len;
  const int64_t eos = std::min<int64_t>(50256, cfg.vocab - 1);
  nlohmann::ordered_json j;
  j["activation_function"] = "gelu_new";
  j["architectures"] = {"GPT2LMHeadModel"};
  j["attn_pdrop"] = json_number(cfg.dropout);
  j["bos_token_id"] = eos;
  j["embd_pdrop"] = json_number(cfg.dropout);
  j["eos_token_id"] = eos;
  j["initializer_range"] = 0.02;
  j["layer_norm_epsilon"] = json_number(cfg.layer_norm_eps);
  j["model_type"] = "gpt2";
  j["n_ctx"] = positions;
  j["n_embd"] = cfg.d_model;
  j["n_head"] = cfg.n_head;
  j["n_inner"] = nullptr;
  j["n_layer"] = cfg.n_layer;
  j["n_positions"] = positions;
  j["reorder_and_upcast_attn"] = false;
  j["resid_pdrop"] = json_number(cfg.dropout);
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["scale_attn_weights"] = true;
  j["summary_activation"] = nullptr;
  j["summary_first_dropout"] = 0.1;
  j["summary_proj_to_labels"] = true;
  j["summary_type"] = "cls_index";
  j["summary_use_proj"] = true;
  j["tie_word_embeddings"] = true;
  j["torch_dtype"] = "float32";
  j["use_cache"] = true;
  j["vocab_size"] = cfg.vocab;
  return j.dump(2) + "\n";
}

void save_gpt2_pretrained(const std::string& dir, const std::vector<ParamInfo>& infos, std::span<const float> flat,
                          const ModelConfig& cfg, const Metadata& metadata) {
  fs::create_directories(dir);
  std::vector<NamedTensorView> views = param_views(infos, flat);
  for (auto& v : views) v.name = gpt2_to_hf_name(v.name);
  Metadata meta = metadata;
  meta["format"] = "pt";  // from_pretrained requires it of safetensors files
  meta["dpt.model"] = "gpt2";
  save_safetensors((fs::path(dir) / "model.safetensors").string(), views, meta);
  write_gpt2_config(dir, cfg);
}

// 0600 and atomic, as the weights beside it (device/safe_file.h).
void write_gpt2_config(const std::string& dir, const ModelConfig& cfg) {
  const std::string config = (fs::path(dir) / "config.json").string();
  try {
    write_file_atomically(config, gpt2_config_json(cfg));
  } catch (const FileWriteError& e) {
    throw CheckpointError(config, e.reason());
  }
}

}  // namespace dpt
