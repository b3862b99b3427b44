// Dispatch of runtime.h: the emulated runtime when DPT_EMULATE_DEVICE=1, CUDA otherwise
// (cuda_runtime.h, which in a build without CUDA says so on every call).
#include "device/runtime.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <vector>

#include "device/cuda_runtime.h"

namespace dpt::device {

bool cuda_built() { return cuda::built(); }

bool emulated() {
  static const bool on = [] {
    const char* raw = std::getenv(kEmulateDeviceVar);
    const std::string_view v = raw ? raw : "";
    if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
    if (v == "0" || v == "false" || v == "off" || v == "no" || v.empty()) return false;
    throw std::invalid_argument(std::string("environment variable ") + kEmulateDeviceVar + "='" + std::string(v) +
                                "' is not a boolean (use 1/0, true/false, on/off)");
  }();
  return on;
}

void throw_not_built(const std::string& what) {
  throw DeviceError(what + ": this build has no CUDA support (configure found no CUDA toolkit, or DPT_WITH_CUDA=OFF; "
                           "see the cmake summary)");
}

int count(std::string* why) {
  if (emulated()) return 1;
  return cuda::device_count(why);
}

int kernel_device_count(std::string* why) { return cuda::device_count(why); }

std::string describe() {
  if (emulated()) return "emulated device (DPT_EMULATE_DEVICE=1: host memory standing in for cuda:0)";
  std::string why;
  int n = cuda::device_count(&why);
  if (n == 0) return cuda::version() + ", no usable device: " + why;
  std::string out = cuda::version() + ", " + std::to_string(n) + (n == 1 ? " device:" : " devices:");
  for (int i = 0; i < n; ++i) out += (i ? ", " : " ") + cuda::device_name(i);
  return out;
}

void check_usable(const Device& d, const std::string& who) {
  if (d.is_cpu()) return;
  std::string why;
  int n = count(&why);
  if (n == 0) throw DeviceError(who + ": " + d.str() + " requested but there is no usable CUDA device (" + why + ")");
  if (d.index < 0 || d.index >= n)
    throw DeviceError(who + ": " + d.str() + " requested but only " + std::to_string(n) + " device(s) exist");
}

Device for_local_rank(int local_rank) {
  std::string why;
  int n = count(&why);
  if (n == 0) throw DeviceError("no usable CUDA device (" + why + ")");
  return Device{DeviceKind::cuda, (local_rank < 0 ? 0 : local_rank) % n};
}

void set_current(const Device& d) {
  if (d.is_cpu() || emulated()) return;
  cuda::set_device(d.index);
}

Device current() {
  if (emulated()) return Device{DeviceKind::cuda, 0};
  return Device{DeviceKind::cuda, cuda::get_device()};
}

void* alloc(const Device& d, size_t bytes) {
  if (d.is_cpu() || emulated()) {
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (!p) throw std::bad_alloc();
    return p;
  }
  return cuda::malloc_device(d.index, bytes);
}

void release(const Device& d, void* p) noexcept {
  if (d.is_cpu() || emulated()) return std::free(p);
  cuda::free_device(p);
}

void* alloc_pinned(size_t bytes) {
  if (emulated() || !cuda::built()) return alloc(Device{}, bytes);
  return cuda::malloc_host(bytes);
}

void release_pinned(void* p) noexcept {
  if (emulated() || !cuda::built()) return std::free(p);
  cuda::free_host(p);
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (emulated()) {
    std::memmove(dst, src, bytes);
    return;
  }
  cuda::memcpy_sync(dst, src, bytes);
}

void copy_on_kernel_stream(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (emulated()) return (void)std::memmove(dst, src, bytes);
  cuda::memcpy_default_stream(dst, src, bytes);
}

void zero_on_kernel_stream(void* p, size_t bytes) {
  if (bytes == 0) return;
  if (emulated()) return (void)std::memset(p, 0, bytes);
  cuda::memset_default_stream(p, bytes);
}

void wait_for_kernels() {
  if (emulated()) return;
  cuda::sync_default_stream();
}

char* PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_ && ptr_) return ptr_;
  if (ptr_) release_pinned(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  ptr_ = static_cast<char*>(alloc_pinned(bytes ? bytes : 1));
  bytes_ = bytes;
  return ptr_;
}

// ---- CopyStream: a CUDA stream and a pool of events, or immediate copies when emulated ----

struct CopyStream::Impl {
  void* stream = nullptr;
  std::vector<void*> events;  // events[k] marks mark k
  size_t issued = 0;
};

CopyStream::CopyStream(const Device& d) : impl_(std::make_unique<Impl>()) {
  if (!emulated()) impl_->stream = cuda::stream_create(d.index);
}

CopyStream::~CopyStream() {
  if (!impl_->stream) return;
  try {
    cuda::stream_sync(impl_->stream);
  } catch (...) {
    // Destruction must not throw; the stream is released either way.
  }
  for (void* e : impl_->events) cuda::event_destroy(e);
  cuda::stream_destroy(impl_->stream);
}

void CopyStream::copy_async(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (!impl_->stream) return (void)std::memmove(dst, src, bytes);
  cuda::memcpy_async(dst, src, bytes, impl_->stream);
}

size_t CopyStream::mark() {
  size_t k = impl_->issued++;
  if (!impl_->stream) return k;
  if (k >= impl_->events.size()) impl_->events.push_back(cuda::event_create());
  cuda::event_record(impl_->events[k], impl_->stream);
  return k;
}

void CopyStream::wait(size_t mark) {
  if (!impl_->stream) return;
  cuda::event_sync(impl_->events.at(mark));
}

void CopyStream::synchronize() {
  if (impl_->stream) cuda::stream_sync(impl_->stream);
  impl_->issued = 0;  // events may be re-recorded from the start
}

}  // namespace dpt::device
