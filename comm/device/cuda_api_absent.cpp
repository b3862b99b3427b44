// cuda_api.h for builds without CUDA: nothing exists, and every call says why.
#include "comm/device/cuda_api.h"

namespace dpt::device::cuda {

namespace {
[[noreturn]] void absent() {
  throw DeviceError("this build has no CUDA support (configure found no CUDA toolkit; see the cmake summary)");
}
}  // namespace

bool built() { return false; }
std::string version() { return "not built with CUDA"; }
int device_count(std::string* why) {
  if (why) *why = "this build has no CUDA support";
  return 0;
}
std::string device_name(int) { absent(); }
void set_device(int) { absent(); }
void* malloc_device(int, size_t) { absent(); }
void free_device(void*) noexcept {}
void* malloc_host(size_t) { absent(); }
void free_host(void*) noexcept {}
void memcpy_sync(void*, const void*, size_t) { absent(); }
void* stream_create(int) { absent(); }
void stream_destroy(void*) noexcept {}
void stream_sync(void*) { absent(); }
void memcpy_async(void*, const void*, size_t, void*) { absent(); }
void* event_create() { absent(); }
void event_destroy(void*) noexcept {}
void event_record(void*, void*) { absent(); }
void event_sync(void*) { absent(); }
void reduce_into(void*, const void*, size_t, DType, ReduceOp) { absent(); }
void divide_in_place(void*, size_t, DType, int) { absent(); }

}  // namespace dpt::device::cuda
