// HostFloats: std::vector<float> whose large allocations (>= 4 MiB) sit on 2 MiB
// boundaries and are marked MADV_HUGEPAGE, so Linux backs them with transparent huge
// pages even in its default "madvise" mode. Why: a 124M-parameter model streams
// gigabytes per step (gradients zeroed, Adam over parameters and gradients, weights
// read by every GEMM); with 4 KiB pages every 4 KiB costs a TLB entry, and first touch
// costs a page fault each. Measured here: a 1 GiB memset 72 -> 55 ms, its first touch
// 11.7 -> 6.8 s. Small allocations go to operator new as usual.
// host_floats_bytes() counts the bytes all HostFloats hold now and at most (parameters,
// gradients, optimizer state, activations): the benchmark's memory breakdown.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace dpt {

struct HostFloatsBytes {
  size_t now = 0, peak = 0;
};
HostFloatsBytes host_floats_bytes();
void count_host_floats(std::ptrdiff_t bytes);  // + on allocation, - on release

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t kHuge = size_t{2} << 20;     // a huge page
  static constexpr size_t kThreshold = size_t{4} << 20;  // smaller: ordinary pages

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    count_host_floats(static_cast<std::ptrdiff_t>(bytes));
    if (bytes < kThreshold) return static_cast<T*>(::operator new(bytes));
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (!p) throw std::bad_alloc();
    ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure leaves ordinary pages
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    count_host_floats(-static_cast<std::ptrdiff_t>(n * sizeof(T)));
    if (n * sizeof(T) < kThreshold) ::operator delete(p);
    else std::free(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

using HostFloats = std::vector<float, HugePageAllocator<float>>;

}  // namespace dpt
