// Sampling text from a causal language model (any Module that takes tokens and
// returns logits [1, T, vocab]). Each new token re-runs the model on the last
// seq_len tokens of the context (no KV cache: the models here are small and
// generation is a demonstration, not a hot path), then picks the next token from the
// logits at the last position:
//   greedy      temperature 0, or top_k 1: the largest logit (the lowest id on a tie);
//   sampling    from softmax(logits / temperature), restricted to the top_k largest
//               logits when top_k > 0 (ties at the k-th value by lower id), drawn with
//               std::mt19937_64 seeded by `seed`, so a seed repeats a sample.
#pragma once

#include <cstdint>
#include <vector>

#include "models/nn/module.h"

namespace dpt {

std::vector<int32_t> generate_tokens(Module& model, std::vector<int32_t> context, int64_t seq_len,
                                     int64_t new_tokens, float temperature, uint64_t seed, int64_t top_k = 0);

}  // namespace dpt
