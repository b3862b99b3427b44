#pragma once
// Point-to-point transfers of float arrays of any length.
//
// Terms:
//   frame limit  the tcp backend refuses one message above COMM_MAX_FRAME_BYTES (1 GiB
//                by default): its guard against a corrupt length read from a socket.
//                A ZeRO shard of a large model is bigger (gpt2-large at 2 ranks: 1.5 GB).
//   chunk        at most kChunkFloats elements (64 MiB) of the array, sent as its own
//                message under tag * kChunksPerTag + its index, so chunks match by tag
//                whatever order the transport delivers them in. tag must be below
//                kMaxUserTag / kChunksPerTag; an array of more than kChunksPerTag chunks
//                (256 GiB) is refused.
// Both sides must pass the same length and tag.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"

namespace dpt {

inline constexpr size_t kChunkFloats = size_t{16} << 20;
inline constexpr int64_t kChunksPerTag = 4096;

std::vector<WorkPtr> isend_chunked(Communicator& comm, const float* data, size_t n, int peer, int64_t tag);
std::vector<WorkPtr> irecv_chunked(Communicator& comm, float* data, size_t n, int peer, int64_t tag);
void wait_all(std::vector<WorkPtr>& works, Communicator& comm);

}  // namespace dpt
