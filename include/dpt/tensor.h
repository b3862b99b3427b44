// dpt::nn::Tensor: a dense float32 array in host memory with a shape, row-major (the
// last dimension contiguous). What a model takes and returns, what a loss reads, what a
// custom layer computes with. Owns its values; copies are deep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dpt::nn {

class Tensor {
 public:
  Tensor() = default;
  // Every element `fill`.
  explicit Tensor(std::vector<int64_t> shape, float fill = 0.0f);
  // The values in row-major order; std::invalid_argument when their count is not the
  // shape's element count.
  Tensor(std::vector<int64_t> shape, std::vector<float> values);
  // Standard normal values (torch.randn), the same for the same seed on any machine.
  static Tensor randn(std::vector<int64_t> shape, uint64_t seed);

  const std::vector<int64_t>& shape() const { return shape_; }
  // Dimension i's size (std::out_of_range past the rank).
  int64_t size(size_t i) const { return shape_.at(i); }
  size_t dim() const { return shape_.size(); }
  size_t numel() const { return values_.size(); }
  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }
  std::span<float> values() { return values_; }
  std::span<const float> values() const { return values_; }
  float& operator[](size_t i) { return values_[i]; }
  float operator[](size_t i) const { return values_[i]; }
  // The single value of a one-element tensor (std::logic_error otherwise).
  float item() const;
  // Same values, another shape of the same element count.
  Tensor reshape(std::vector<int64_t> shape) const;
  // Rows [begin, end) of dimension 0 (a mini-batch of a dataset held in one tensor).
  Tensor rows(int64_t begin, int64_t end) const;
  // "[2, 10]"
  std::string shape_text() const;
  // Each sample's values of several tensors back to back: [batch, a...] and [batch, b...]
  // give [batch, numel(a) + numel(b)] (a model's several inputs as one, nn::Inputs).
  static Tensor concat_samples(const std::vector<Tensor>& parts);

 private:
  std::vector<int64_t> shape_;
  std::vector<float> values_;
};

}  // namespace dpt::nn
