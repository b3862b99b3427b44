// Sampling text from a causal language model (any Module that takes tokens and
// returns logits [1, T, vocab]). Each new token re-runs the model on the last
// seq_len tokens of the context (no KV cache: the models here are small and
// generation is a demonstration, not a hot path), then samples from
// softmax(logits / temperature) at the last position; temperature 0 is greedy.
#pragma once

#include <cstdint>
#include <vector>

#include "models/module.h"

namespace dpt {

std::vector<int32_t> generate_tokens(Module& model, std::vector<int32_t> context, int64_t seq_len,
                                     int64_t new_tokens, float temperature, uint64_t seed);

}  // namespace dpt
