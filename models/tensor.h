// Tensor: a dense float array with a shape, stored row-major (last dimension
// contiguous). Only the CPU device exists today; the device field is carried so a
// CUDA device can be added without changing the interface.
//
// resize() keeps the allocation when the new size fits, so layers that own their
// activation tensors allocate once and reuse the memory every step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace dpt {

enum class TensorDevice { kCpu };  // (comm/types.h has the communication Device)

inline size_t shape_numel(std::span<const int64_t> shape) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative tensor dimension");
    n *= static_cast<size_t>(d);
  }
  return n;
}

std::string shape_to_string(std::span<const int64_t> shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape) { resize(std::move(shape)); }

  // Sets the shape; reallocates only when the element count grows past capacity.
  void resize(std::vector<int64_t> shape) {
    data_.resize(shape_numel(shape));
    shape_ = std::move(shape);
  }
  void resize(std::initializer_list<int64_t> shape) { resize(std::vector<int64_t>(shape)); }
  void resize_like(const Tensor& other) { resize(other.shape_); }

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::span<float> span() { return data_; }
  std::span<const float> span() const { return data_; }
  size_t numel() const { return data_.size(); }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t last_dim() const { return shape_.empty() ? 1 : shape_.back(); }
  TensorDevice device() const { return device_; }
  void zero() { std::fill(data_.begin(), data_.end(), 0.0f); }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }

 private:
  std::vector<float> data_;
  std::vector<int64_t> shape_;
  TensorDevice device_ = TensorDevice::kCpu;
};

}  // namespace dpt
