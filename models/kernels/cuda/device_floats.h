// DeviceFloats: a grow-only float array in CUDA device memory (device::alloc on the
// thread's current device), the device counterpart of the std::vector<float> that holds a
// host Tensor's or ParamStore's data.
// reserve() keeps the allocation when the new size fits (layers reuse their activation
// memory every step) and does not keep the contents when it grows. Copies are deep.
#pragma once

#include <cstddef>
#include <utility>

#include "device/runtime.h"

namespace dpt {

class DeviceFloats {
 public:
  DeviceFloats() = default;
  ~DeviceFloats() { free(); }
  DeviceFloats(const DeviceFloats& o) { *this = o; }
  DeviceFloats& operator=(const DeviceFloats& o) {
    if (this != &o) {
      reserve(o.size_);
      size_ = o.size_;
      device::copy_on_kernel_stream(ptr_, o.ptr_, size_ * sizeof(float));
    }
    return *this;
  }
  DeviceFloats(DeviceFloats&& o) noexcept { swap(o); }
  DeviceFloats& operator=(DeviceFloats&& o) noexcept { swap(o); return *this; }

  void reserve(size_t n) {
    if (n > capacity_) {
      free();
      device_ = device::current();
      ptr_ = static_cast<float*>(device::alloc(device_, n * sizeof(float)));
      capacity_ = n;
    }
    size_ = n;
  }
  void clear() noexcept {
    free();
    size_ = 0;
  }
  float* data() const { return ptr_; }
  size_t size() const { return size_; }
  size_t capacity_bytes() const { return capacity_ * sizeof(float); }

 private:
  void free() noexcept {
    if (ptr_) device::release(device_, ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
  }
  void swap(DeviceFloats& o) noexcept {
    std::swap(device_, o.device_);
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }
  Device device_{};
  float* ptr_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace dpt
