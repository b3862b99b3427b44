#pragma once
// ZeRO-3 parameters: each rank keeps only its own shard of the flat parameter buffer
// resident; a layer's parameters are gathered just before its forward and again
// before its backward, and released right after.
//
// Terms (see shard_layout.h for shard and owner):
//   layer ranges  LayerInfo::ranges, the merged flat [begin, end) ranges a layer reads.
//   piece         a layer range cut at shard boundaries, so one owner holds it.
//   gather        every piece a rank does not own is broadcast from its owner, in place
//                 into the flat buffer (owners' shards tile the buffer, so the
//                 per-owner broadcasts together are an allgather of the layer's ranges).
//   release       the non-owned pieces go back to the OS (models/kernels/cpu/page_memory.h); a piece that
//                 another held layer also covers stays (tied or shared parameters).
//   held          a layer whose gather was launched and which is not released yet.
//   prefetch      when a layer's gather completes, the next layer in the direction of
//                 travel (forward: i+1, backward: i-1) is launched asynchronously, so
//                 its broadcasts run while this layer computes.
//   wire          f32, or bf16 (mixed precision): the owner sends a bf16 copy of its
//                 piece (its working values are bf16 already, so nothing is lost), the
//                 others receive into a staging copy and widen it into the flat buffer
//                 when the layer is acquired: half the bytes on the wire. Launch order depends
//                 only on the layer sequence, so every rank issues the same collectives.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "models/nn/module.h"
#include "parallel/shard_layout.h"

namespace dpt {

class ZeroParamGatherer {
 public:
  ZeroParamGatherer(Module& model, Communicator& comm, const ShardLayout& layout, bool prefetch,
                    DType wire = DType::f32);
  ~ZeroParamGatherer();

  void set_communicator(Communicator& comm);
  // Collective: every rank then holds all parameters (checkpoints, checksums), as the
  // owners hold them (always in fp32, whatever the wire).
  void gather_all();
  // Collective: rank `root` then holds all parameters, the others only their own shard
  // (each owner sends its shard to root).
  void gather_all_to(int root);
  // Local: back to the own shard only (also releases any held layer).
  void release_all();
  // Largest number of non-own parameter bytes held at once so far (the gathered
  // working set: the current layer plus the prefetched one).
  size_t peak_gathered_bytes() const { return peak_gathered_; }
  // Bytes of the pieces broadcast since the last call (this rank's view, wire dtype).
  int64_t take_bytes() { return std::exchange(bytes_, 0); }

 private:
  struct Piece {
    size_t begin = 0, end = 0;
    int owner = 0;
  };
  struct LayerState {
    std::vector<Piece> pieces;  // empty: the layer has no parameters
    std::vector<WorkPtr> works;
    std::vector<std::vector<uint16_t>> staged;  // 16-bit wire: one copy per piece in flight
    bool held = false;
  };
  void launch(size_t layer);
  void acquire(size_t layer, int direction);
  // Waits for the layer's broadcasts and (16-bit wire) widens the received pieces.
  void finish(size_t layer);
  void release(size_t layer);
  bool overlaps_held(const Piece& p, size_t except) const;

  Module& model_;
  Communicator* comm_;
  ShardLayout layout_;
  bool prefetch_;
  DType wire_;
  std::vector<LayerState> layers_;
  size_t peak_gathered_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace dpt
