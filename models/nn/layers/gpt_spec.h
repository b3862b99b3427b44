// GptBlockSpec: what tells one GPT's transformer blocks from another's. The byte-level
// `gpt` and Hugging Face's GPT-2 (`gpt2`) run the same layers; they differ in sizes,
// dropout, and in how parameters are named and laid out:
//
//   part               gpt (dpt names, [out, in])   gpt2 (HF GPT2LMHeadModel, Conv1D [in, out])
//   first LayerNorm    ln1                          ln_1
//   q/k/v projection   attn.qkv                     attn.c_attn
//   attention output   attn.proj                    attn.c_proj
//   second LayerNorm   ln2                          ln_2
//   MLP up (d -> 4d)   mlp.fc                       mlp.c_fc
//   MLP down (4d -> d) mlp.proj                     mlp.c_proj
//   dropouts           attn.attn_dropout (on the attention probabilities),
//                      attn.resid_dropout, mlp.dropout (no parameters; the names key
//                      their masks)
#pragma once

#include <cstdint>
#include <string>

#include "models/nn/layers/linear.h"

namespace dpt {

struct GptBlockSpec {
  int64_t dim = 0;
  int64_t heads = 0;
  int64_t n_layer = 0;       // the model's block count: residual projections start at N(0, 0.02/sqrt(2 n_layer))
  float dropout = 0.0f;      // attention-probability and residual dropout
  float ln_eps = 1e-5f;
  bool hf_names = false;     // Hugging Face's names and Conv1D layout (the table above)

  WeightLayout layout() const { return hf_names ? WeightLayout::kInOut : WeightLayout::kOutIn; }
  const char* ln1() const { return hf_names ? "ln_1" : "ln1"; }
  const char* ln2() const { return hf_names ? "ln_2" : "ln2"; }
  const char* qkv() const { return hf_names ? "c_attn" : "qkv"; }
  const char* attn_proj() const { return hf_names ? "c_proj" : "proj"; }
  const char* fc() const { return hf_names ? "mlp.c_fc" : "mlp.fc"; }
  const char* mlp_proj() const { return hf_names ? "mlp.c_proj" : "mlp.proj"; }
};

}  // namespace dpt
