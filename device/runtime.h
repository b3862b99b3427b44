#pragma once
// The device runtime: whether CUDA is present, device memory, streams and copies, behind
// an interface without CUDA headers. comm/ (staging, device collectives) and models/ (a
// model's tensors and parameters on a GPU) both use it, so a build without CUDA has one
// answer to "is there a device" and one error saying there is none.
//
// Terms:
//   runtime    - what answers these calls: "cuda" (built with CUDA, cuda_runtime.cu),
//                "emulated" (DPT_EMULATE_DEVICE=1: device memory is ordinary host memory
//                and copies are memcpy, so a machine without a GPU can exercise every
//                staging path; it runs no kernels; for tests only), or absent (built
//                without CUDA, cuda_runtime_absent.cpp: every call that needs a device
//                throws DeviceError saying why).
//   pinned     - page-locked host memory: device copies to and from it run asynchronously
//                and at full bus speed. Staging buffers are pinned.
//   kernel     - the calling thread's default stream, where models/' kernels and cuBLAS
//   stream       run in issue order; *_on_kernel_stream calls queue behind them.
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

#include "device/device.h"

namespace dpt::device {

// The variable that turns emulation on (comm/launch/env.h lists it with the other knobs).
inline constexpr const char* kEmulateDeviceVar = "DPT_EMULATE_DEVICE";

// No usable device, a CUDA call that failed, or a device buffer where none can exist.
class DeviceError : public std::runtime_error { using std::runtime_error::runtime_error; };

bool cuda_built();   // this binary was built with CUDA
bool emulated();     // DPT_EMULATE_DEVICE=1
// Throws DeviceError naming `what` and that this build has no CUDA; the one wording of it.
[[noreturn]] void throw_not_built(const std::string& what);
// Usable devices; 0 with `why` set (e.g. "cudaErrorNoDevice: no CUDA-capable device is
// detected") when there are none. An emulated device counts.
int count(std::string* why = nullptr);
// Devices that run CUDA kernels (models/' layers): count() without the emulated one.
int kernel_device_count(std::string* why = nullptr);
// "cuda 13.0, 1 device: NVIDIA H100 80GB HBM3" or the reason there is none.
std::string describe();
// Throws DeviceError naming `who` and the reason unless `d` is usable here.
void check_usable(const Device& d, const std::string& who);
// The device a rank uses: LOCAL_RANK modulo the number of devices.
Device for_local_rank(int local_rank);
// The calling thread's device (cuda:N), which alloc(current(), ...) and kernels use.
void set_current(const Device& d);
Device current();

void* alloc(const Device& d, size_t bytes);
void release(const Device& d, void* p) noexcept;
void* alloc_pinned(size_t bytes);
void release_pinned(void* p) noexcept;
// Synchronous copy; either side may be host or device memory.
void copy(void* dst, const void* src, size_t bytes);
// Queued on the kernel stream after the kernels issued so far (device memory only).
void copy_on_kernel_stream(void* dst, const void* src, size_t bytes);
void zero_on_kernel_stream(void* p, size_t bytes);
// Waits for everything queued on the kernel stream, so another stream or thread may
// read what the kernels wrote.
void wait_for_kernels();

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
