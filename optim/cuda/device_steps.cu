// CUDA implementation of device_steps.h. Every pass is memory-bound: a grid-stride loop
// of coalesced loads and stores, enough blocks to fill the GPU several times over.
// Built with --fmad=false (optim/CMakeLists.txt): update_rules.h's formulas give the CPU's
// bits only when no multiply and add are fused.
#include <cuda_runtime.h>

#include <algorithm>

#include "device/runtime.h"
#include "models/kernels/cuda/block_sum.cuh"
#include "models/kernels/cuda/cuda_check.h"
#include "optim/cuda/device_steps.h"

namespace dpt::gpu {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 4096;  // grid-stride beyond: enough to fill any current GPU

unsigned blocks_for(size_t n) {
  return unsigned(std::min<size_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

template <bool kL2, bool kDecoupled>
__global__ void adam_k(float* p, const float* g, float* m, float* v, size_t n, AdamScalars s) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    adam_update<kL2, kDecoupled>(p[i], g[i], m[i], v[i], s);
}

template <bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
__global__ void sgd_k(float* p, const float* g, float* buf, size_t n, SgdScalars s) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float unused = 0.0f;
    sgd_update<kDecay, kMomentum, kFirst, kNesterov>(p[i], g[i], kMomentum ? buf[i] : unused, s);
  }
}

template <bool kDecay>
void launch_sgd(float* p, const float* g, float* buf, size_t n, const SgdScalars& s, bool momentum, bool first,
                bool nesterov) {
  const unsigned b = blocks_for(n);
  if (!momentum) sgd_k<kDecay, false, false, false><<<b, kThreads>>>(p, g, buf, n, s);
  else if (first && nesterov) sgd_k<kDecay, true, true, true><<<b, kThreads>>>(p, g, buf, n, s);
  else if (first) sgd_k<kDecay, true, true, false><<<b, kThreads>>>(p, g, buf, n, s);
  else if (nesterov) sgd_k<kDecay, true, false, true><<<b, kThreads>>>(p, g, buf, n, s);
  else sgd_k<kDecay, true, false, false><<<b, kThreads>>>(p, g, buf, n, s);
}

__global__ void squares_k(const float* x, size_t n, double* partial) {
  double acc = 0.0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    acc += double(x[i]) * double(x[i]);
  const double total = block_sum<kThreads>(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void sum_partials_k(const double* partial, unsigned count, double* out) {
  double acc = 0.0;
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  const double total = block_sum<kThreads>(acc);
  if (threadIdx.x == 0) *out = total;
}

__global__ void scale_k(float* x, size_t n, float factor) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] *= factor;
}

// Every thread that sees a non-finite result stores 1: the same value from any number of
// writers, so no atomics are needed.
__global__ void scale_find_nonfinite_k(float* x, size_t n, float factor, int* found) {
  bool bad = false;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    x[i] *= factor;
    bad |= !isfinite(x[i]);
  }
  if (bad) *found = 1;
}

}  // namespace

void adam_step(float* p, const float* g, float* m, float* v, size_t n, const AdamScalars& s, bool l2,
               bool decoupled) {
  if (!n) return;
  const unsigned b = blocks_for(n);
  if (decoupled) adam_k<false, true><<<b, kThreads>>>(p, g, m, v, n, s);
  else if (l2) adam_k<true, false><<<b, kThreads>>>(p, g, m, v, n, s);
  else adam_k<false, false><<<b, kThreads>>>(p, g, m, v, n, s);
  check(cudaGetLastError(), "adam_step");
}

void sgd_step(float* p, const float* g, float* buf, size_t n, const SgdScalars& s, bool decay, bool momentum,
              bool first, bool nesterov) {
  if (!n) return;
  if (decay) launch_sgd<true>(p, g, buf, n, s, momentum, first, nesterov);
  else launch_sgd<false>(p, g, buf, n, s, momentum, first, nesterov);
  check(cudaGetLastError(), "sgd_step");
}

double squared_norm(const float* x, size_t n) {
  if (!n) return 0.0;
  const unsigned b = blocks_for(n);
  device::DeviceMemory scratch(device::current(), (b + 1) * sizeof(double));
  auto* partial = static_cast<double*>(scratch.data());
  squares_k<<<b, kThreads>>>(x, n, partial);
  check(cudaGetLastError(), "squared_norm (blocks)");
  sum_partials_k<<<1, kThreads>>>(partial, b, partial + b);
  check(cudaGetLastError(), "squared_norm (total)");
  double total = 0.0;
  device::copy(&total, partial + b, sizeof(double));  // synchronous: after both kernels
  return total;
}

void scale(float* x, size_t n, float factor) {
  if (!n) return;
  scale_k<<<blocks_for(n), kThreads>>>(x, n, factor);
  check(cudaGetLastError(), "scale");
}

bool scale_and_find_nonfinite(float* x, size_t n, float factor) {
  if (!n) return false;
  device::DeviceMemory flag(device::current(), sizeof(int));
  const int zero = 0;
  device::copy(flag.data(), &zero, sizeof zero);
  scale_find_nonfinite_k<<<blocks_for(n), kThreads>>>(x, n, factor, static_cast<int*>(flag.data()));
  check(cudaGetLastError(), "scale_and_find_nonfinite");
  int found = 0;
  device::copy(&found, flag.data(), sizeof found);  // synchronous: after the kernel
  return found != 0;
}

}  // namespace dpt::gpu
