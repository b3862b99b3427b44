// parallel_for: the layers' elementwise loops (im2col, col2im, BatchNorm, pooling) on the
// same number of threads as the BLAS (blas_threads(), the process's thread plan), so that a run with T
// threads uses T cores between the GEMMs too, as PyTorch's intra-op threads do.
//
// Terms:
//   range   [0, n), cut into chunks of `grain` indices (the last one shorter).
//   pool    T - 1 persistent workers, asleep on a condition variable between loops (no
//           spinning: on a shared machine a spinning thread takes a core from others).
// Where the products run on oneDNN's OpenMP team (DPT_GEMM=onednn, or native bf16
// products: models/kernels/cpu/gemm.h), the loops run on that team instead of the pool, in the same
// chunks: the team's threads spin for a while after each product, and a second set of
// threads woken meanwhile would fight them for the same cores.
// The caller publishes the loop, wakes the workers and takes chunks itself from a shared
// counter, so a worker that is slow to wake costs at most the chunk it claimed: the
// caller never waits for a chunk nobody has started. f(begin, end) must be safe to run
// on disjoint ranges at the same time. Nested or concurrent calls (another thread already
// inside a parallel_for) run serially on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace dpt {

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& f);

// Items per chunk for loops whose items cost `work_per_item` elementary operations
// each: chunks of about 16K operations, big enough to outweigh handing a chunk over.
inline int64_t parallel_grain(int64_t work_per_item) {
  constexpr int64_t kChunkWork = 16384;
  return work_per_item >= kChunkWork ? 1 : kChunkWork / (work_per_item > 0 ? work_per_item : 1);
}

// While one lives, parallel_for runs every loop of this thread serially, in one call
// f(0, n): how tests check that a loop gives the bits on many threads that it gives on one.
class SerialLoopsScope {
 public:
  SerialLoopsScope();
  ~SerialLoopsScope();
  SerialLoopsScope(const SerialLoopsScope&) = delete;
  SerialLoopsScope& operator=(const SerialLoopsScope&) = delete;

 private:
  bool previous_;
};

// Threads parallel_for uses (the BLAS's thread count when the pool was made; 1: serial).
int parallel_threads();

}  // namespace dpt
