#pragma once
// A batch of samples as flat, row-major arrays. Which fields are filled depends on the
// dataset: images and feature vectors use `x`, language models use `tokens`, classifiers
// and language models use `labels`, regression models use `targets`. Unused fields are
// left empty, so a model can check what it was given.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dpt {

struct Batch {
  std::vector<float> x;               // [n, sample_shape...] float inputs (images, features)
  std::vector<int32_t> tokens;        // [n, seq_len] token ids (language models)
  std::vector<int32_t> labels;        // [n] class labels, or [n, seq_len] next-token targets
  std::vector<float> targets;         // [n, k] regression targets (MSE models)
  std::vector<int64_t> sample_shape;  // shape of one sample of x (or {seq_len} for tokens)
  size_t n = 0;                       // number of samples in the batch
};

}  // namespace dpt
