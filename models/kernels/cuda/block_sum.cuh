// block_sum: the sum of one double per thread over a block of kThreads threads, through
// shared memory in a fixed tree, so a reduction gives the same bits every run (the
// kernels that reduce channels, norms and moments use it). Every thread gets the total.
#pragma once

namespace dpt::gpu {

template <int kThreads>
__device__ double block_sum(double v) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const double total = part[0];
  __syncthreads();  // part may be written again by the caller's next block_sum
  return total;
}

}  // namespace dpt::gpu
