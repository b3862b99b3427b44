// GPT-2 weights in Hugging Face's layout, in and out.
//
// Names. Our gpt2's parameters carry GPT2LMHeadModel's own state_dict names
// (models/nn/layers/gpt_spec.h), in the same [in, out] Conv1D layout, so the mapping is:
//   ours                                  a GPT2LMHeadModel file      a GPT2Model file
//   transformer.wte.weight [V, d]         transformer.wte.weight      wte.weight
//   transformer.wpe.weight [P, d]         transformer.wpe.weight      wpe.weight
//   transformer.h.N.ln_1.{weight,bias}    transformer.h.N.ln_1.*      h.N.ln_1.*
//   transformer.h.N.attn.c_attn.weight [d, 3d] (q | k | v columns), .bias [3d]
//   transformer.h.N.attn.c_proj.weight [d, d], .bias
//   transformer.h.N.ln_2.*, .mlp.c_fc.weight [d, 4d], .mlp.c_proj.weight [4d, d], biases
//   transformer.ln_f.{weight,bias}
//   (tied to transformer.wte.weight)      lm_head.weight [V, d]       (absent)
//   (none: causal-mask buffers)           h.N.attn.bias, h.N.attn.masked_bias (ignored)
// hf_to_gpt2_name / gpt2_to_hf_name are that table.
//
// Loading (load_gpt2_weights): every parameter must be in the file, with or without the
// "transformer." prefix, with exactly the model's shape, as F32, F16 or BF16; the buffers
// are skipped; lm_head.weight, if present, must equal the token embedding (it is tied);
// any other tensor is refused. Errors name the file, the tensor and both shapes, and come
// before anything is copied into the model.
//
// Saving (save_gpt2_pretrained): DIR/model.safetensors with GPT2LMHeadModel's names, F32,
// Conv1D [in, out], metadata format=pt, without lm_head.weight (save_pretrained leaves
// the tied copy out too), and DIR/config.json with GPT2Config's keys, so that
// GPT2LMHeadModel.from_pretrained(DIR) loads it.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/nn/model_config.h"
#include "models/nn/param_store.h"
#include "models/io/safetensors.h"

namespace dpt {

class Module;

// Our name for a tensor name found in a Hugging Face file; nullopt for the causal-mask
// buffers (skipped). lm_head.weight maps to itself (the caller checks it is tied).
std::optional<std::string> hf_to_gpt2_name(const std::string& hf_name);
// The GPT2LMHeadModel name of one of our parameters (the identity: see the table).
std::string gpt2_to_hf_name(const std::string& name);

// The shape a GPT-2 file holds: layers, width, vocab and positions from its tensors;
// heads from a config.json beside the file (n_head), else 0 (unknown).
struct Gpt2FileShape {
  int64_t layers = 0, width = 0, vocab = 0, positions = 0, heads = 0;
};
Gpt2FileShape read_gpt2_file_shape(const std::string& path);

// on_loaded(index) runs after each parameter is read (the Module overload seals it:
// a sharded build keeps only its shard, param_store.h).
void load_gpt2_weights(const std::string& path, const std::vector<ParamInfo>& infos, std::span<float> flat,
                       const std::function<void(size_t)>& on_loaded = {});
void load_gpt2_weights(const std::string& path, Module& model);

// config.json for a gpt2 of this configuration (GPT2Config's keys, pretty-printed).
std::string gpt2_config_json(const ModelConfig& cfg);
// Writes DIR/config.json (atomically: a temporary file renamed over it), beside a
// model.safetensors in GPT2LMHeadModel's layout (ours: the trainer's checkpoints).
void write_gpt2_config(const std::string& dir, const ModelConfig& cfg);
// Writes DIR/model.safetensors and DIR/config.json (DIR is created if missing); `flat`
// laid out by `infos` (a model's flat_params(), or a consolidated ZeRO buffer).
// `metadata` joins the file's (a trainer's step and data position; format=pt stays).
void save_gpt2_pretrained(const std::string& dir, const std::vector<ParamInfo>& infos,
                          std::span<const float> flat, const ModelConfig& cfg, const Metadata& metadata = {});

}  // namespace dpt
