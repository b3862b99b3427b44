#pragma once
// A batch of samples as flat, row-major arrays. Which fields are filled depends on the
// dataset: images and feature vectors use `x`, language models use `tokens`, classifiers
// and language models use `labels`, regression models use `targets`. Unused fields are
// left empty, so a model can check what it was given.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dpt {

// A label that counts in no loss (padding, the prompt part of a sequence): Hugging Face's
// and PyTorch's ignore_index. The cross-entropy (models/loss.h) skips such positions.
inline constexpr int32_t kIgnoreLabel = -100;

struct Batch {
  std::vector<float> x;               // [n, sample_shape...] float inputs (images, features)
  std::vector<int32_t> tokens;        // [n, seq_len] token ids (language models)
  std::vector<int32_t> labels;        // [n] class labels, or [n, seq_len] next-token targets (or kIgnoreLabel)
  std::vector<float> targets;         // [n, k] regression targets (MSE models)
  std::vector<int64_t> sample_shape;  // shape of one sample of x (or {seq_len} for tokens)
  size_t n = 0;                       // number of samples in the batch
};

}  // namespace dpt
