#include "models/kernels/cpu/lazy_floats.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>
#include <utility>

#include "models/kernels/cpu/huge_pages.h"

namespace dpt {

LazyFloats::LazyFloats(size_t n) : size_(n) {
  if (n == 0) return;
  const size_t bytes = n * sizeof(float);
  constexpr size_t kHuge = HugePageAllocator<float>::kHuge;
  const bool huge = bytes >= HugePageAllocator<float>::kThreshold;
  // Over-reserve by one huge page so the array can start on a 2 MiB boundary;
  // untouched address space costs nothing (MAP_NORESERVE: no swap accounted either).
  map_bytes_ = huge ? bytes + kHuge : bytes;
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw std::bad_alloc();
  }
  auto addr = reinterpret_cast<uintptr_t>(map_);
  if (huge) {
    addr = (addr + kHuge - 1) / kHuge * kHuge;
    ::madvise(reinterpret_cast<void*>(addr), (bytes + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);  // advice only
  }
  data_ = reinterpret_cast<float*>(addr);
  count_host_floats(static_cast<std::ptrdiff_t>(bytes));
}

void LazyFloats::reset() noexcept {
  if (!map_) return;
  ::munmap(map_, map_bytes_);
  count_host_floats(-static_cast<std::ptrdiff_t>(size_ * sizeof(float)));
  map_ = nullptr;
  data_ = nullptr;
  size_ = map_bytes_ = 0;
}

LazyFloats::~LazyFloats() { reset(); }

LazyFloats::LazyFloats(LazyFloats&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      map_(std::exchange(other.map_, nullptr)), map_bytes_(std::exchange(other.map_bytes_, 0)) {}

LazyFloats& LazyFloats::operator=(LazyFloats&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
  }
  return *this;
}

}  // namespace dpt
