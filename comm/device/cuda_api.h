#pragma once
// The CUDA calls device_runtime.cpp dispatches to. Implemented by cuda_api.cu (builds
// with CUDA) or cuda_api_absent.cpp (builds without, where each call says so). Only
// device_runtime.cpp includes this header. Failures throw DeviceError with CUDA's text.
#include <cstddef>
#include <string>

#include "comm/device/device_runtime.h"

namespace dpt::device::cuda {

bool built();
std::string version();                  // "cuda 13.0" (runtime) or why not built
int device_count(std::string* why);
std::string device_name(int index);
void set_device(int index);
void* malloc_device(int index, size_t bytes);
void free_device(void* p) noexcept;
void* malloc_host(size_t bytes);
void free_host(void* p) noexcept;
void memcpy_sync(void* dst, const void* src, size_t bytes);

void* stream_create(int index);
void stream_destroy(void* s) noexcept;
void stream_sync(void* s);
void memcpy_async(void* dst, const void* src, size_t bytes, void* s);
void* event_create();
void event_destroy(void* e) noexcept;
void event_record(void* e, void* s);
void event_sync(void* e);

// Kernels (cuda_reduce.cu); run on the current device and synchronize.
void reduce_into(void* acc, const void* in, size_t count, DType t, ReduceOp op);
void divide_in_place(void* buf, size_t count, DType t, int divisor);

}  // namespace dpt::device::cuda
