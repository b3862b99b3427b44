#pragma once
// A batch of samples as flat, row-major arrays. Which fields are filled depends on the
// dataset: images and feature vectors use `x`, language models use `tokens`, classifiers
// and language models use `labels`, regression models use `targets`. Unused fields are
// left empty, so a model can check what it was given.
//
// An *ignored target* is a label equal to kIgnoreLabel: the position has no next token to
// predict (a padded position, or the last token of a document), and the loss must skip
// it, neither adding it nor counting it in the mean. The value is Hugging Face's and
// PyTorch's (CrossEntropyLoss's ignore_index default).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dpt {

inline constexpr int32_t kIgnoreLabel = -100;

struct Batch {
  std::vector<float> x;               // [n, sample_shape...] float inputs (images, features)
  std::vector<int32_t> tokens;        // [n, seq_len] token ids (language models)
  std::vector<int32_t> labels;        // [n] class labels, or [n, seq_len] next-token targets
                                      // (kIgnoreLabel where there is none)
  std::vector<float> targets;         // [n, k] regression targets (MSE models)
  std::vector<int64_t> sample_shape;  // shape of one sample of x (or {seq_len} for tokens)
  size_t n = 0;                       // number of samples in the batch
};

// Labels that are not kIgnoreLabel: the targets a language-model batch's loss averages over.
inline size_t count_targets(const Batch& b) {
  return size_t(std::count_if(b.labels.begin(), b.labels.end(),
                              [](int32_t l) { return l != kIgnoreLabel; }));
}

}  // namespace dpt
