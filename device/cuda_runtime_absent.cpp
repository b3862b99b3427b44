// cuda_runtime.h for builds without CUDA, the project's one stand-in for an absent
// CUDA: no devices exist, and every call that needs one says why.
#include "device/cuda_runtime.h"

namespace dpt::device::cuda {

namespace {
[[noreturn]] void absent(const char* what) { throw_not_built(what); }
}  // namespace

bool built() { return false; }
std::string version() { return "not built with CUDA"; }
int device_count(std::string* why) {
  if (why) *why = "this build has no CUDA support";
  return 0;
}
std::string device_name(int) { absent("device_name"); }
void set_device(int) { absent("set_device"); }
int get_device() { absent("current device"); }
void* malloc_device(int, size_t) { absent("device alloc"); }
void free_device(void*) noexcept {}
void* malloc_host(size_t) { absent("pinned alloc"); }
void free_host(void*) noexcept {}
void memcpy_sync(void*, const void*, size_t) { absent("device copy"); }
void memcpy_default_stream(void*, const void*, size_t) { absent("device copy"); }
void memset_default_stream(void*, size_t) { absent("device zero"); }
void sync_default_stream() { absent("wait for kernels"); }
void* stream_create(int) { absent("stream create"); }
void stream_destroy(void*) noexcept {}
void stream_sync(void*) { absent("stream sync"); }
void memcpy_async(void*, const void*, size_t, void*) { absent("async device copy"); }
void* event_create() { absent("event create"); }
void event_destroy(void*) noexcept {}
void event_record(void*, void*) { absent("event record"); }
void event_sync(void*) { absent("event sync"); }

}  // namespace dpt::device::cuda
