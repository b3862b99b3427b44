#pragma once
// Elastic ZeRO: in-memory copies of the shards, so the survivors of a dead rank rebuild
// the whole model state without disk (Horovod's commit, but replicated to a neighbour).
//
// Terms (see shard_layout.h for shard and owner):
//   shard state  what rank r alone holds between steps: its shard of the parameters (the
//                fp32 masters under mixed precision) and of every optimizer state buffer,
//                plus the optimizer's step count.
//   snapshot     taken at step s (a multiple of --elastic-snapshot-every K): rank r keeps
//                a copy of its own shard state and receives one of its ring neighbour's
//                (r+1 mod N), with the training position (epoch, sample position) of s.
//   committed / previous  a new snapshot replaces the committed one only once its
//                exchange finished; the one before stays as `previous`. Every rank had
//                finished snapshot s's exchange before any starts the next one (the
//                steps between are collectives), so the oldest committed snapshot among
//                the survivors is one every survivor still holds.
//   provider     after a failure, old rank q's shard state comes from q itself if it
//                survived, else from q-1 (its neighbour copy); when both are gone the
//                state is lost and the job falls back to its last checkpoint on disk.
//   assemble     every survivor writes the shards it provides into zeroed full-size
//                buffers and one allreduce(sum) per buffer gives everyone the full state
//                (each element has exactly one provider, so the sum is exact).
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "parallel/shard_layout.h"

namespace dpt {

struct ShardState {
  std::vector<float> params;                                          // shard of the parameters (masters)
  std::vector<std::pair<std::string, std::vector<float>>> optimizer;  // shard of each state buffer
  int64_t optimizer_steps = 0;
};

struct ZeroSnapshot {
  int64_t step = -1;  // -1: none
  int epoch = 0;
  size_t position = 0;
  ShardLayout layout;  // the world it was taken in
  int rank = 0;        // this rank in that world
  ShardState own, neighbour;  // neighbour: rank + 1 mod N's
};

// The full state of a step, assembled from the survivors' snapshots.
struct FullState {
  std::vector<float> params;
  std::vector<std::pair<std::string, std::vector<float>>> optimizer;
  int64_t optimizer_steps = 0;
};

// Collective on the communicator the snapshot is taken in: sends `own` to rank-1 and
// receives rank+1's; returns the completed snapshot.
ZeroSnapshot exchange_snapshot(Communicator& comm, const ShardLayout& layout, ShardState own, int64_t step, int epoch,
                               size_t position);

// Collective on the new communicator: `snap` is this survivor's snapshot (every survivor's
// at the same step, taken in the old world of layout `old`), null for a newcomer;
// `buffer_names` the optimizer's state buffers; `old_rank_alive[q]` which old ranks
// survived. Throws ElasticError (on every member alike) naming the old ranks whose state
// nobody holds.
FullState assemble_full_state(Communicator& comm, const ZeroSnapshot* snap, const ShardLayout& old,
                              const std::vector<std::string>& buffer_names, const std::vector<bool>& old_rank_alive);

}  // namespace dpt
