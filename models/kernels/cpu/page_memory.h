#pragma once
// Page-level memory of a float buffer: ZeRO-2/3 release gradient and parameter pages
// they do not own (optim/), ParamStore its unowned parameters while a model is built
// sharded (param_store.h).
//
// Terms:
//   page       the OS's unit of resident memory (sysconf(_SC_PAGESIZE) bytes).
//   release    hand the pages that lie wholly inside a slice back to the OS
//              (madvise MADV_DONTNEED on private anonymous memory: they read as zero
//              afterwards and cost nothing until written again) and zero the slice's
//              partial pages at its edges by hand. Either way the slice reads as zero.
//   resident   bytes of a range whose pages are in RAM now (mincore), i.e. what a
//              buffer really costs, as opposed to its allocated (virtual) size.
#include <cstddef>

namespace dpt {

void release_slice(float* begin, float* end);
// For a slice that stays released for good (a sharded build's unowned parameters): its
// whole pages are excluded from transparent huge pages (madvise MADV_NOHUGEPAGE), so
// khugepaged never collapses a 2 MiB range around the few pages still written there
// (a released slice's zeroed edges) into a huge page, which would make up to 511
// released pages resident again. Advice only: failure changes nothing else.
void keep_small_pages(float* begin, float* end);
size_t resident_bytes(const void* data, size_t bytes);

}  // namespace dpt
