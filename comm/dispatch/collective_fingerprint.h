#pragma once
// Collective mismatch checks (COMM_DEBUG_COLLECTIVES=1, or CommOptions::debug_collectives).
//
// Terms:
//   fingerprint - what every rank must agree on about one collective: its kind, reduce
//                 op, dtype, element count, root and sequence number. 32 bytes on the
//                 wire, little-endian, fixed size so that ranks which disagree about the
//                 collective's size still exchange fingerprints in step.
//   count       - the per-rank element count all ranks pass the same: send.count for
//                 allreduce/reduce/allgather/gather/alltoall, recv.count for
//                 reduce_scatter/scatter, the buffer for broadcast, 0 for barrier.
// Before a collective runs, the ranks allgather their fingerprints (ring allgather on
// a tag of their own, above the collectives' tags); when any differs, every rank throws
// the same MismatchError naming both sides. A rank that issues no collective at all
// still shows up as a TimeoutError on the others.
#include <array>
#include <cstdint>
#include <string>

#include "comm/communicator.h"

namespace dpt {

struct CollectiveFingerprint {
  uint8_t kind = 0;
  uint8_t op = 0;     // 0 when the collective does not reduce
  uint8_t dtype = 0;  // 0 for barrier
  int32_t root = -1;  // -1 when the collective has no root
  uint64_t count = 0;
  int64_t seq = -1;

  static constexpr size_t kWireBytes = 32;
  static CollectiveFingerprint of(const CollArgs& a);
  std::array<unsigned char, kWireBytes> encode() const;
  // Throws std::invalid_argument for a malformed encoding (bad kind/op/dtype byte).
  static CollectiveFingerprint decode(const unsigned char* in);
  bool operator==(const CollectiveFingerprint&) const = default;
  // "allreduce(f32, count 1024, op sum) #3"
  std::string str() const;
};

// Tags the fingerprint exchange uses: above every collective's tag (communicator.cpp
// gives collectives kMaxUserTag + 1 + seq mod 2^30).
int64_t fingerprint_tag(int64_t seq);

// Exchanges fingerprints of `a` and throws MismatchError on every rank when they differ.
// Runs on the communicator's worker thread, before the collective itself.
void check_collective_fingerprints(Communicator& c, const CollArgs& a);

}  // namespace dpt
