// Element-wise reductions on device data, one grid-stride kernel per (dtype, op), with
// the same results as the host kernels in comm/reduce_kernels.cpp:
//   f16/bf16 - widened to fp32, reduced, rounded back to nearest even;
//   integers - wrap around on overflow (computed in the unsigned type of the same width);
//   min/max  - (b < a ? b : a) and (a < b ? b : a), as std::min/std::max, NaN included.
// `avg` reduces like `sum`; the caller divides once by the world size (divide_in_place).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "comm/device/cuda_reduce.h"
#include "device/runtime.h"

namespace dpt::device::cuda_kernels {

namespace {

// How a storage type is computed with: itself, fp32 for the 16-bit floats.
template <typename T> struct Compute { using type = T; };
template <> struct Compute<__half> { using type = float; };
template <> struct Compute<__nv_bfloat16> { using type = float; };

template <typename T> __device__ typename Compute<T>::type widen(T v) { return v; }
template <> __device__ float widen<__half>(__half v) { return __half2float(v); }
template <> __device__ float widen<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ T narrow(typename Compute<T>::type v) { return v; }
template <> __device__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename C> __device__ C combine(C a, C b, ReduceOp op) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    if (op == ReduceOp::sum || op == ReduceOp::avg) return C(U(a) + U(b));
    if (op == ReduceOp::prod) return C(U(a) * U(b));
  } else {
    if (op == ReduceOp::sum || op == ReduceOp::avg) return a + b;
    if (op == ReduceOp::prod) return a * b;
  }
  if (op == ReduceOp::min) return b < a ? b : a;
  return a < b ? b : a;  // max
}

template <typename T>
__global__ void reduce_kernel(T* acc, const T* in, size_t n, ReduceOp op) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    acc[i] = narrow<T>(combine(widen(acc[i]), widen(in[i]), op));
}

template <typename T>
__global__ void divide_kernel(T* buf, size_t n, int divisor) {
  using C = typename Compute<T>::type;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    buf[i] = narrow<T>(C(widen(buf[i]) / C(divisor)));
}

constexpr int kThreads = 256;
unsigned blocks_for(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 ? (b ? b : 1) : 65535);  // grid-stride covers the rest
}

void finish(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    throw DeviceError(std::string(what) + " kernel failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

template <typename T> void launch_reduce(void* acc, const void* in, size_t n, ReduceOp op) {
  reduce_kernel<T><<<blocks_for(n), kThreads>>>(static_cast<T*>(acc), static_cast<const T*>(in), n, op);
  finish("reduce");
}
template <typename T> void launch_divide(void* buf, size_t n, int d) {
  divide_kernel<T><<<blocks_for(n), kThreads>>>(static_cast<T*>(buf), n, d);
  finish("divide");
}

}  // namespace

void reduce_into(void* acc, const void* in, size_t n, DType t, ReduceOp op) {
  if (n == 0) return;
  switch (t) {
    case DType::f32: return launch_reduce<float>(acc, in, n, op);
    case DType::f64: return launch_reduce<double>(acc, in, n, op);
    case DType::f16: return launch_reduce<__half>(acc, in, n, op);
    case DType::bf16: return launch_reduce<__nv_bfloat16>(acc, in, n, op);
    case DType::i8: return launch_reduce<int8_t>(acc, in, n, op);
    case DType::u8: return launch_reduce<uint8_t>(acc, in, n, op);
    case DType::i32: return launch_reduce<int32_t>(acc, in, n, op);
    case DType::i64: return launch_reduce<int64_t>(acc, in, n, op);
  }
}

void divide_in_place(void* buf, size_t n, DType t, int d) {
  if (n == 0) return;
  switch (t) {
    case DType::f32: return launch_divide<float>(buf, n, d);
    case DType::f64: return launch_divide<double>(buf, n, d);
    case DType::f16: return launch_divide<__half>(buf, n, d);
    case DType::bf16: return launch_divide<__nv_bfloat16>(buf, n, d);
    case DType::i8: return launch_divide<int8_t>(buf, n, d);
    case DType::u8: return launch_divide<uint8_t>(buf, n, d);
    case DType::i32: return launch_divide<int32_t>(buf, n, d);
    case DType::i64: return launch_divide<int64_t>(buf, n, d);
  }
}

}  // namespace dpt::device::cuda_kernels
