// LazyFloats: a fixed-size float array that reads as zero and costs no RAM until
// written. Why: ParamStore's flat parameter and gradient buffers hold the whole model
// on every rank, but under ZeRO-3 a rank keeps only its shard of the parameters and
// only the gradient buckets in flight; a std::vector zero-fills its elements, which
// makes every page resident at allocation (gpt2-large: 6.2 GB per rank before any
// sharding could start). Anonymous private mmap memory is zero by the kernel's
// guarantee and committed page by page on first write; release_slice
// (models/kernels/cpu/page_memory.h) hands pages back.
// Large arrays (>= 4 MiB) sit on 2 MiB boundaries with MADV_HUGEPAGE, as HostFloats
// (huge_pages.h) does, and are counted in host_floats_bytes() the same way.
#pragma once

#include <cstddef>

namespace dpt {

class LazyFloats {
 public:
  LazyFloats() = default;
  explicit LazyFloats(size_t n);
  ~LazyFloats();
  LazyFloats(LazyFloats&& other) noexcept;
  LazyFloats& operator=(LazyFloats&& other) noexcept;
  LazyFloats(const LazyFloats&) = delete;
  LazyFloats& operator=(const LazyFloats&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  // Bytes of address space reserved (the allocation, not what is resident).
  size_t allocated_bytes() const { return size_ * sizeof(float); }

 private:
  void reset() noexcept;

  float* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // the mapping (before alignment), for munmap
  size_t map_bytes_ = 0;
};

}  // namespace dpt
