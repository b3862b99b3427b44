#pragma once
// Shared by the hierarchical reduce-scatter and allgather: both run on a scratch copy of
// the P blocks (one per rank) laid out in the order the subgroups need, not in rank order.
//   host-major order - block (j, k) at position j x H + k is the block of host k's local
//                      rank j: local rank j's chunk of the host's ring is the H blocks its
//                      cross-host group (host 0..H-1's local rank j) owns, in that group's
//                      rank order. Needs every host to have L ranks.
//   host order       - Topology::host_order(): for hosts of different sizes, whose ring
//                      runs on host_ordered_group().
// `rank_at[q]` is the rank whose block sits at position q.
#include <cstring>
#include <vector>

#include "comm/launch/topology.h"
#include "comm/types.h"

namespace dpt::algo {

inline std::vector<int> host_major_ranks(const Topology& t) {
  const int H = t.hosts(), L = t.uniform_local_size();
  std::vector<int> rank_at(size_t(H) * size_t(L));
  for (int j = 0; j < L; ++j)
    for (int k = 0; k < H; ++k) rank_at[size_t(j * H + k)] = t.ranks_of_host(k)[size_t(j)];
  return rank_at;
}

// Copies rank-ordered blocks of `block_bytes` from `by_rank` to position order in `by_pos`
// (to_positions) or back.
inline void permute_blocks(const std::vector<int>& rank_at, size_t block_bytes, char* by_pos, char* by_rank,
                           bool to_positions) {
  for (size_t q = 0; q < rank_at.size(); ++q) {
    char* pos = by_pos + q * block_bytes;
    char* rank = by_rank + size_t(rank_at[q]) * block_bytes;
    if (to_positions) std::memcpy(pos, rank, block_bytes);
    else std::memcpy(rank, pos, block_bytes);
  }
}

}  // namespace dpt::algo
