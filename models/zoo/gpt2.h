// GPT-2's published sizes, and how a command line's model flags become a gpt2
// ModelConfig.
//
//   size   HF name       layers heads width   parameters (vocab 50257, 1024 positions)
//   124M   gpt2            12    12    768    124,439,808
//   355M   gpt2-medium     24    16   1024    354,823,168
//   774M   gpt2-large      36    20   1280    774,030,080
//   1558M  gpt2-xl         48    25   1600    1,557,611,200
//
// Resolution order for --model gpt2 (configure_gpt2):
//   1. the named size (--gpt2-size), or 124M when none is named;
//   2. except: with an --init-from file and neither a size nor a shape flag (heads do not
//      count: a file cannot tell them), the shape is the file's (layers, width, vocab,
//      positions from its tensors; heads from the flag, else a config.json beside the
//      file, else the GPT-2 size of that width);
//   3. shape flags given explicitly (layers, heads, width, vocab, positions) override.
// A file that then disagrees with the model is refused when it is loaded (make_model),
// naming the tensor and both shapes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/nn/model_config.h"

namespace dpt {

inline constexpr int64_t kGpt2Vocab = 50257;
inline constexpr int64_t kGpt2Positions = 1024;
inline constexpr float kGpt2Dropout = 0.1f;  // resid_pdrop = embd_pdrop = attn_pdrop

struct Gpt2Size {
  const char* name;     // "124M"
  const char* hf_name;  // "gpt2"
  int64_t layers, heads, width;
};
const std::vector<Gpt2Size>& gpt2_sizes();
// By "124M" or "gpt2" (and so on); throws listing the valid names.
const Gpt2Size& gpt2_size(const std::string& name);

struct Gpt2Request {
  std::string size;  // empty: 124M, or the file's shape (rule 2)
  std::optional<int64_t> layers, heads, width, vocab, positions;
  std::string init_from;
};

// Sets cfg's transformer sizes and init_from for gpt2 (seq_len, dropout and seed are
// left as they are). Reads only the file's header (and a config.json beside it).
void configure_gpt2(const Gpt2Request& request, ModelConfig& cfg);

// Parameters of a GPT-2 of that shape (tied head counted once).
int64_t gpt2_param_count(const ModelConfig& cfg);
// Parameters of its largest layer: the embedding (wte and wpe), usually.
int64_t gpt2_largest_layer_params(const ModelConfig& cfg);
// The fp32 activation memory one training forward/backward of `batch` samples of
// cfg.seq_len tokens holds in this implementation, where every layer keeps its output
// and its input-gradient buffer across steps (so they are not reallocated): per block
// 4 x (44 s b h + 2 a s^2 b) bytes, plus 4 b s V for the logits (their gradient is
// written over them, Module::loss) and 4 b s h for the embedding output. Fitted to bench/gpt2_step's measured
// "activations and buffers" (HostFloats peak minus the model states; dropout 0.1) on
// 124M at b4 s64, b4 s256, b8 s64 and 774M at b4 s64 (within 0.8% of each), and checked
// on 355M at b2 s128, when the logits' gradient had a buffer of its own; since it is
// written over them, 124M measures 468, 2086 and 935 MiB there (estimates 464, 2071,
// 928: within 1%). Korthikanti et al.'s (2022)
// minimum for a block is 34 s b h + 5 a s^2 b bytes in 16 bits, i.e. 17 s b h floats:
// this one holds 2.6x that. Used to refuse a job that will not fit (train/memory_check.h).
double gpt2_activation_bytes(const ModelConfig& cfg, int64_t batch);

}  // namespace dpt
