// DeviceScratch: a grow-only device allocation on the current device for a thread's
// scratch copies (the 16-bit operand copies and workspaces of the cuBLASLt products and
// the cuDNN convolutions): reserve() keeps the allocation when the request fits and does
// not keep the contents when it grows.
#pragma once

#include <cstddef>

#include "device/runtime.h"

namespace dpt::gpu {

class DeviceScratch {
 public:
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch() { if (ptr_) device::release(device_, ptr_); }
  void* reserve(size_t bytes) {
    if (bytes > bytes_) {
      if (ptr_) device::release(device_, ptr_);
      ptr_ = nullptr;
      device_ = device::current();
      ptr_ = device::alloc(device_, bytes);
      bytes_ = bytes;
    }
    return ptr_;
  }

 private:
  Device device_{};
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dpt::gpu
