#pragma once
// What the communication layer needs from a GPU runtime, behind an interface without
// CUDA headers, so comm/ and the host-only backends compile and run without CUDA.
//
// Terms:
//   runtime   - the implementation answering these calls: "cuda" (built with CUDA and
//               a device is present), "emulated" (DPT_EMULATE_DEVICE=1: device memory is
//               ordinary host memory and copies are memcpy, so a machine without a GPU
//               can exercise every staging path; for tests only), or none (every call
//               that needs a device throws DeviceError saying why).
//   pinned    - page-locked host memory: device copies to and from it run asynchronously
//               and at full bus speed. Staging buffers are pinned.
//   staging   - copying device data to pinned host memory so a transport that only moves
//               host memory can carry it, and the result back (comm/device/staging.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "comm/types.h"

namespace dpt::device {

// No usable device, a CUDA call that failed, or a device buffer where none can exist.
class DeviceError : public std::runtime_error { using std::runtime_error::runtime_error; };

bool cuda_built();   // this binary was built with CUDA
bool emulated();     // DPT_EMULATE_DEVICE=1
// Usable devices; 0 with `why` set (e.g. "cudaErrorNoDevice: no CUDA-capable device is
// detected") when there are none.
int count(std::string* why = nullptr);
// "cuda 13.0, 1 device: NVIDIA H100 80GB HBM3" or the reason there is none.
std::string describe();
// Throws DeviceError naming `who` and the reason unless `d` is usable here.
void check_usable(const Device& d, const std::string& who);
// The device a rank uses: LOCAL_RANK modulo the number of devices.
Device for_local_rank(int local_rank);
void set_current(const Device& d);

void* alloc(const Device& d, size_t bytes);
void release(const Device& d, void* p) noexcept;
void* alloc_pinned(size_t bytes);
void release_pinned(void* p) noexcept;
// Synchronous copy; either side may be host or device memory.
void copy(void* dst, const void* src, size_t bytes);

// acc[i] = acc[i] (op) in[i] on device data, every DType (f16/bf16 in fp32); `avg`
// reduces like sum. Synchronous.
void reduce_into(const Device& d, void* acc, const void* in, size_t count, DType t, ReduceOp op);
// buf[i] /= divisor on device data (integers truncate toward zero). Synchronous.
void divide_in_place(const Device& d, void* buf, size_t count, DType t, int divisor);

// Owning device allocation.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const Device& d, size_t bytes) : device_(d), bytes_(bytes), ptr_(bytes ? alloc(d, bytes) : nullptr) {}
  ~DeviceMemory() { if (ptr_) release(device_, ptr_); }
  DeviceMemory(DeviceMemory&& o) noexcept { swap(o); }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept { swap(o); return *this; }
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }

 private:
  void swap(DeviceMemory& o) noexcept {
    std::swap(device_, o.device_); std::swap(bytes_, o.bytes_); std::swap(ptr_, o.ptr_);
  }
  Device device_{};
  size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

// Owning pinned host allocation that grows on demand (staging buffers are reused).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { if (ptr_) release_pinned(ptr_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  // At least `bytes` (contents not kept).
  char* reserve(size_t bytes);

 private:
  char* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// An in-order queue of asynchronous copies (a CUDA stream) with marks the host can wait
// for: copy_async(); m = mark(); ... wait(m) returns once every copy before m is done.
class CopyStream {
 public:
  explicit CopyStream(const Device& d);
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;
  void copy_async(void* dst, const void* src, size_t bytes);
  size_t mark();
  void wait(size_t mark);
  void synchronize();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpt::device
