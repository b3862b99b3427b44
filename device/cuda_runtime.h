#pragma once
// The CUDA runtime calls runtime.cpp dispatches to. Implemented by cuda_runtime.cu
// (builds with CUDA) or cuda_runtime_absent.cpp (builds without, where each call says
// so); CMake compiles one of the two. Only runtime.cpp includes this header. Failures
// throw DeviceError with CUDA's text.
#include <cstddef>
#include <string>

#include "device/runtime.h"

namespace dpt::device::cuda {

bool built();
std::string version();                  // "cuda 13.0" (runtime) or why not built
int device_count(std::string* why);
std::string device_name(int index);
void set_device(int index);
int get_device();
void* malloc_device(int index, size_t bytes);
void free_device(void* p) noexcept;
void* malloc_host(size_t bytes);
void free_host(void* p) noexcept;
void memcpy_sync(void* dst, const void* src, size_t bytes);

// The calling thread's default stream (the kernel stream of runtime.h).
void memcpy_default_stream(void* dst, const void* src, size_t bytes);
void memset_default_stream(void* p, size_t bytes);
void sync_default_stream();

void* stream_create(int index);
void stream_destroy(void* s) noexcept;
void stream_sync(void* s);
void memcpy_async(void* dst, const void* src, size_t bytes, void* s);
void* event_create();
void event_destroy(void* e) noexcept;
void event_record(void* e, void* s);
void event_sync(void* e);

}  // namespace dpt::device::cuda
