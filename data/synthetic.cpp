#include "data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "data/rng.h"

namespace dpt {

namespace {

// Stream numbers for mix_seed: the teacher is shared by both splits, samples are not.
constexpr uint64_t kTeacherStream = 0;
uint64_t sample_stream(Split s) { return s == Split::train ? 1 : 2; }

void gather_rows(const std::vector<float>& src, size_t width, std::span<const size_t> idx,
                 std::vector<float>& dst) {
  dst.resize(idx.size() * width);
  for (size_t b = 0; b < idx.size(); ++b)
    std::copy_n(src.data() + idx[b] * width, width, dst.data() + b * width);
}

}  // namespace

SyntheticRegression::SyntheticRegression(size_t num_samples, size_t in_features,
                                         size_t out_features, uint64_t seed, Split split)
    : num_samples_(num_samples), in_(in_features), out_(out_features), split_(split) {
  if (in_ == 0 || out_ == 0) throw std::invalid_argument("SyntheticRegression: zero feature count");
  Rng teacher(mix_seed(seed, kTeacherStream));
  std::vector<double> w(out_ * in_), bias(out_);
  const double scale = 1.0 / std::sqrt(double(in_));
  for (auto& v : w) v = scale * standard_normal(teacher);
  for (auto& v : bias) v = standard_normal(teacher);

  Rng rng(mix_seed(seed, sample_stream(split)));
  x_.resize(num_samples_ * in_);
  targets_.resize(num_samples_ * out_);
  for (size_t s = 0; s < num_samples_; ++s) {
    float* x = x_.data() + s * in_;
    for (size_t i = 0; i < in_; ++i) x[i] = float(standard_normal(rng));
    for (size_t o = 0; o < out_; ++o) {
      double acc = bias[o];
      for (size_t i = 0; i < in_; ++i) acc += w[o * in_ + i] * x[i];
      targets_[s * out_ + o] = float(acc + 0.1 * standard_normal(rng));
    }
  }
}

std::string SyntheticRegression::name() const {
  return std::string("synthetic-regression/") + split_name(split_);
}

void SyntheticRegression::fill(std::span<const size_t> indices, Batch& out) const {
  check_indices(*this, indices);
  out.n = indices.size();
  out.sample_shape = {int64_t(in_)};
  gather_rows(x_, in_, indices, out.x);
  gather_rows(targets_, out_, indices, out.targets);
  out.tokens.clear();
  out.labels.clear();
}

SyntheticClassification::SyntheticClassification(size_t num_samples, size_t num_features,
                                                 size_t num_classes, uint64_t seed, Split split,
                                                 float noise)
    : num_samples_(num_samples), features_(num_features), classes_(num_classes), split_(split) {
  if (features_ == 0 || classes_ == 0) {
    throw std::invalid_argument("SyntheticClassification: zero feature or class count");
  }
  Rng teacher(mix_seed(seed, kTeacherStream));
  std::vector<float> centers(classes_ * features_);
  for (auto& v : centers) v = float(standard_normal(teacher));

  Rng rng(mix_seed(seed, sample_stream(split)));
  x_.resize(num_samples_ * features_);
  labels_.resize(num_samples_);
  for (size_t s = 0; s < num_samples_; ++s) {
    const size_t label = size_t(uniform_below(rng, classes_));
    labels_[s] = int32_t(label);
    for (size_t f = 0; f < features_; ++f) {
      x_[s * features_ + f] = centers[label * features_ + f] + noise * float(standard_normal(rng));
    }
  }
}

std::string SyntheticClassification::name() const {
  return std::string("synthetic-classification/") + split_name(split_);
}

void SyntheticClassification::fill(std::span<const size_t> indices, Batch& out) const {
  check_indices(*this, indices);
  out.n = indices.size();
  out.sample_shape = {int64_t(features_)};
  gather_rows(x_, features_, indices, out.x);
  out.labels.resize(indices.size());
  for (size_t b = 0; b < indices.size(); ++b) out.labels[b] = labels_[indices[b]];
  out.tokens.clear();
  out.targets.clear();
}

}  // namespace dpt
