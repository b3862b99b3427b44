#pragma once
// Small generated datasets for tests and demos, deterministic for a seed. Both are drawn
// from a fixed *teacher* (a function of the seed alone) so that the train and test
// splits, which draw different samples, describe the same task and a model can learn it.
#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace dpt {

// Regression, the shape of the PyTorch DDP tutorial's ToyModel: x ~ N(0, 1)^in and
// targets = W x + b + 0.1 * noise, with teacher W ~ N(0, 1/in), b ~ N(0, 1).
class SyntheticRegression : public Dataset {
 public:
  SyntheticRegression(size_t num_samples, size_t in_features = 10, size_t out_features = 5,
                      uint64_t seed = 0, Split split = Split::train);
  size_t size() const override { return num_samples_; }
  // x: [n, in_features] (sample_shape {in}), targets: [n, out_features].
  void fill(std::span<const size_t> indices, Batch& out) const override;
  std::string name() const override;
  size_t in_features() const { return in_; }
  size_t out_features() const { return out_; }

 private:
  size_t num_samples_, in_, out_;
  Split split_;
  std::vector<float> x_, targets_;
};

// Classification: class centers c_k ~ N(0, 1)^features (the teacher), labels uniform in
// [0, num_classes), x = c_label + N(0, noise^2)^features.
class SyntheticClassification : public Dataset {
 public:
  SyntheticClassification(size_t num_samples, size_t num_features = 784, size_t num_classes = 10,
                          uint64_t seed = 0, Split split = Split::train, float noise = 1.0f);
  size_t size() const override { return num_samples_; }
  // x: [n, num_features] (sample_shape {num_features}), labels: [n].
  void fill(std::span<const size_t> indices, Batch& out) const override;
  std::string name() const override;
  size_t num_features() const { return features_; }
  size_t num_classes() const override { return classes_; }

 private:
  size_t num_samples_, features_, classes_;
  Split split_;
  std::vector<float> x_;
  std::vector<int32_t> labels_;
};

}  // namespace dpt
