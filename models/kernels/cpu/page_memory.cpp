#include "models/kernels/cpu/page_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dpt {

namespace {
uintptr_t page_size() {
  static const uintptr_t p = uintptr_t(sysconf(_SC_PAGESIZE));
  return p;
}
}  // namespace

void release_slice(float* begin, float* end) {
  const uintptr_t ps = page_size();
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin), e = reinterpret_cast<uintptr_t>(end);
  const uintptr_t lo = (b + ps - 1) / ps * ps, hi = e / ps * ps;
  if (hi > lo && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) == 0) {
    std::fill(begin, reinterpret_cast<float*>(lo), 0.0f);
    std::fill(reinterpret_cast<float*>(hi), end, 0.0f);
  } else {
    std::fill(begin, end, 0.0f);  // too small to hold a whole page, or madvise refused
  }
}

void keep_small_pages(float* begin, float* end) {
  const uintptr_t ps = page_size();
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin), e = reinterpret_cast<uintptr_t>(end);
  const uintptr_t lo = (b + ps - 1) / ps * ps, hi = e / ps * ps;
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_NOHUGEPAGE);
}

size_t resident_bytes(const void* data, size_t bytes) {
  if (bytes == 0) return 0;
  const uintptr_t ps = page_size();
  const uintptr_t b = reinterpret_cast<uintptr_t>(data), e = b + bytes;
  const uintptr_t lo = b / ps * ps, hi = (e + ps - 1) / ps * ps;
  std::vector<unsigned char> vec((hi - lo) / ps);
  if (mincore(reinterpret_cast<void*>(lo), hi - lo, vec.data()) != 0) return bytes;  // unknown: count it all
  size_t total = 0;
  for (size_t i = 0; i < vec.size(); ++i) {
    if (!(vec[i] & 1)) continue;
    const uintptr_t pb = std::max(lo + i * ps, b), pe = std::min(lo + (i + 1) * ps, e);
    total += pe - pb;
  }
  return total;
}

}  // namespace dpt
