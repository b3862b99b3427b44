#pragma once
// Shared by the fuzz targets and their seed generator.
//
// FUZZ_CHECK(cond, what): a property every input must satisfy. A violation prints the
// property and aborts; libFuzzer reports that as a crash and saves the input as the
// reproducer, like a sanitizer finding.
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, what)                                                                      \
  do {                                                                                              \
    if (!(cond)) {                                                                                  \
      std::fprintf(stderr, "fuzz property violated: %s\n  (%s, %s:%d)\n", what, #cond, __FILE__, \
                   __LINE__);                                                                       \
      std::abort();                                                                                 \
    }                                                                                               \
  } while (0)

namespace dpt::fuzz {

// The job token of fuzz_frame's handshake checks; the seeds carry proofs made with it.
inline constexpr const char* kToken = "fuzz-job-token-0123456789abcdef";
// The frame length limit fuzz_frame decodes with: COMM_MAX_FRAME_BYTES's default.
inline constexpr unsigned long long kMaxFrameBytes = 1ull << 30;

}  // namespace dpt::fuzz
