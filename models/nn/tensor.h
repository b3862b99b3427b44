// Tensor: a dense float array with a shape, stored row-major (last dimension
// contiguous), in host memory (kCpu) or on the current CUDA device (kCuda; memory from
// device/runtime.h, kernels in models/kernels/cuda/gpu_ops.h). data() is a device pointer for a
// kCuda tensor: only the layers' CUDA paths, gpu:: and device:: functions may touch it; span() and operator[] are for
// host tensors.
//
// resize() keeps the allocation when the new size fits, so layers that own their
// activation tensors allocate once and reuse the memory every step. resize_like()
// also takes the other tensor's device: a layer's output lives where its input does.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/kernels/cuda/device_floats.h"
#include "models/kernels/cpu/huge_pages.h"

namespace dpt {

enum class TensorDevice { kCpu, kCuda };  // (comm/types.h has the communication Device)

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
    numel_ = shape_numel(shape);
    if (device_ == TensorDevice::kCpu) data_.resize(numel_);
    else device_data_.reserve(numel_);
    shape_ = std::move(shape);
  }
  void resize(std::initializer_list<int64_t> shape) { resize(std::vector<int64_t>(shape)); }
  void resize_like(const Tensor& other) {
    set_device(other.device_);
    resize(other.shape_);
  }
  // Moves the storage to `d`; the contents are not kept (the shape is, with fresh memory).
  void set_device(TensorDevice d) {
    if (d == device_) return;
    device_ = d;
    if (d == TensorDevice::kCpu) {
      device_data_.clear();
      data_.resize(numel_);
    } else {
      data_ = {};
      device_data_.reserve(numel_);
    }
  }
  bool on_cuda() const { return device_ == TensorDevice::kCuda; }
  // A host tensor with this tensor's shape and values (downloaded when on the device).
  Tensor to_host() const {
    if (!on_cuda()) return *this;
    Tensor h(shape_);
    device::copy(h.data(), device_data_.data(), numel_ * sizeof(float));
    return h;
  }

  float* data() { return on_cuda() ? device_data_.data() : data_.data(); }
  const float* data() const { return on_cuda() ? device_data_.data() : data_.data(); }
  std::span<float> span() { host_only("span"); return data_; }
  std::span<const float> span() const { host_only("span"); return data_; }
  size_t numel() const { return numel_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t last_dim() const { return shape_.empty() ? 1 : shape_.back(); }
  TensorDevice device() const { return device_; }
  void zero() {
    if (on_cuda()) device::zero_on_kernel_stream(device_data_.data(), numel_ * sizeof(float));
    else std::fill(data_.begin(), data_.end(), 0.0f);
  }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }

 private:
  void host_only(const char* what) const {
    if (on_cuda()) throw std::logic_error(std::string("Tensor::") + what + " on a tensor in CUDA memory");
  }
  HostFloats data_;                // kCpu storage (large ones on huge pages)
  DeviceFloats device_data_;       // kCuda storage
  size_t numel_ = 0;
  std::vector<int64_t> shape_;
  TensorDevice device_ = TensorDevice::kCpu;
};

}  // namespace dpt
