#pragma once
// Elastic ZeRO: in-memory copies of the shards, so the survivors of dead ranks rebuild
// the whole model state without disk (Horovod's commit, but replicated to neighbours).
//
// Terms (see shard_layout.h for shard and owner):
//   shard state  what rank r alone holds between steps: its shard of the parameters (the
//                fp32 masters under mixed precision) and of every optimizer state buffer,
//                plus the optimizer's step count.
//   replicas R   how many ring successors' shard states each rank keeps a copy of
//                (--elastic-snapshot-replicas, at most N-1): rank r holds copies of
//                r+1 .. r+R (mod N), so any R ranks may die at once, and R+1 consecutive
//                ones on the ring are the smallest loss that the snapshots cannot cover.
//   snapshot     taken at step s (a multiple of --elastic-snapshot-every K) in elastic
//                generation g: rank r keeps a copy of its own shard state and receives
//                its R successors', with the training position (epoch, sample position)
//                of s. (s, g) names it: after a re-form the group snapshots the adopted
//                step again in the new world, so one step may have two snapshots.
//   committed / previous  a new snapshot replaces the committed one only once its
//                exchange finished; the one before stays as `previous`. Every rank had
//                finished a snapshot's exchange before any starts the next one in that
//                world (the steps between are collectives); so the oldest committed
//                snapshot among the survivors, by (step, generation), is one every
//                survivor still holds, and the group restores that one.
//   provider     of rank q's shard state (q a rank of the snapshot's world): q itself if
//                it survived, else the nearest of q-1 .. q-R that did; none: the state
//                is lost and the job falls back to its last checkpoint on disk. Who
//                survived is what the holders of the snapshot say (their ranks in it),
//                never the numbering of the generations in between, which may have
//                formed and failed without training.
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
  int64_t step = -1;    // -1: none
  int generation = -1;  // the elastic generation it was taken in
  int epoch = 0;
  size_t position = 0;
  ShardLayout layout;  // the world it was taken in
  int rank = 0;        // this rank in that world
  ShardState own;
  std::vector<ShardState> copies;  // copies[d-1]: rank + d mod N's, d = 1 .. R
};

// The full state of a step, assembled from the survivors' snapshots, and where that step
// stood in the data.
struct RestoredState {
  std::vector<float> params;
  std::vector<std::pair<std::string, std::vector<float>>> optimizer;
  int64_t optimizer_steps = 0;
  int64_t step = -1;
  int epoch = 0;
  size_t position = 0;
};

// Collective on the communicator the snapshot is taken in: sends `own` to ranks
// rank-1 .. rank-R and receives the shard states of rank+1 .. rank+R (R = `replicas`,
// capped at N-1); returns the completed snapshot of `step`, taken in `generation`.
ZeroSnapshot exchange_snapshot(Communicator& comm, const ShardLayout& layout, ShardState own, int64_t step, int epoch,
                               size_t position, int generation, int replicas);

// Collective on a new generation's communicator: `held` are this member's snapshots
// (committed, then previous; none for a newcomer), `numel` the model's parameter count,
// `buffer_names` the optimizer's state buffers. The members agree on the snapshot to
// restore (see "committed / previous") and assemble its full state. Throws ElasticError,
// on every member alike, naming the ranks of the snapshot's world whose state nobody
// holds, or when no member holds a snapshot.
RestoredState restore_from_snapshots(Communicator& comm, const std::vector<const ZeroSnapshot*>& held, size_t numel,
                                     const std::vector<std::string>& buffer_names);

}  // namespace dpt
