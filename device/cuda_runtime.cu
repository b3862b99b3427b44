// cuda_runtime.h over the CUDA runtime. Every call checks its status and throws DeviceError
// with CUDA's own name and text for the failure.
#include <cuda_runtime.h>

#include "device/cuda_runtime.h"

namespace dpt::device::cuda {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw DeviceError(std::string(what) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
}  // namespace

bool built() { return true; }

std::string version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "cuda (runtime version unknown)";
  return "cuda " + std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

int device_count(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    // Clear the sticky error state so later, unrelated calls do not report it.
    (void)cudaGetLastError();
    if (why) *why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device is present";
  return n;
}

std::string device_name(int index) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
  return p.name;
}

void set_device(int index) { check(cudaSetDevice(index), "cudaSetDevice"); }

int get_device() {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

void* malloc_device(int index, size_t bytes) {
  set_device(index);
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  return p;
}
void free_device(void* p) noexcept { (void)cudaFree(p); }

void* malloc_host(size_t bytes) {
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes), "cudaMallocHost");
  return p;
}
void free_host(void* p) noexcept { (void)cudaFreeHost(p); }

void memcpy_sync(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

// Stream 0 is the legacy default stream: every kernel of models/ runs there.
void memcpy_default_stream(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0), "cudaMemcpyAsync device to device");
}
void memset_default_stream(void* p, size_t bytes) { check(cudaMemsetAsync(p, 0, bytes, 0), "cudaMemsetAsync"); }
void sync_default_stream() { check(cudaStreamSynchronize(0), "cudaStreamSynchronize"); }

void* stream_create(int index) {
  set_device(index);
  cudaStream_t s = nullptr;
  // A blocking stream: it waits for work on the legacy default stream, where a caller
  // that uses no streams produced the data we are about to copy.
  check(cudaStreamCreate(&s), "cudaStreamCreate");
  return s;
}
void stream_destroy(void* s) noexcept { (void)cudaStreamDestroy(static_cast<cudaStream_t>(s)); }
void stream_sync(void* s) { check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize"); }

void memcpy_async(void* dst, const void* src, size_t bytes, void* s) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(s)), "cudaMemcpyAsync");
}

void* event_create() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  return e;
}
void event_destroy(void* e) noexcept { (void)cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
void event_record(void* e, void* s) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)), "cudaEventRecord");
}
void event_sync(void* e) { check(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), "cudaEventSynchronize"); }

}  // namespace dpt::device::cuda
