#pragma once
// ZeRO stages 1 and 2 with --overlap-comm on: the parameter allgather after the step,
// overlapped with the next forward.
//
// Terms (see shard_layout.h for shard and owner):
//   piece     a slice of the flat parameter buffer inside one shard, at most piece_bytes
//             long; the pieces tile [0, P) in increasing offset order, which is forward
//             order (parameters are registered as forward first uses them).
//   refresh   after the step every piece is broadcast from its owner, asynchronously,
//             in piece order: together an allgather of the updated shards, moving the
//             same bytes to every rank. Nothing is computed, so the bits equal the
//             allgather's.
//   due       a layer's last piece: before the layer's forward (on_layer_forward) the
//             compute thread waits until every piece up to it has arrived, so layer 0
//             starts as soon as its own pieces are in while the rest keep streaming.
//   settle    wait for everything (checkpoints, backend switch, end of training).
//   wire      f32, or bf16 (mixed precision): owners send a bf16 copy of their piece,
//             receivers widen it when it is due (as the stage-3 gatherer does).
//   stats     comm time is from the refresh's launch to its last piece's arrival;
//             exposed is what the forward waited for.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "models/nn/module.h"
#include "parallel/shard_layout.h"

namespace dpt {

class ZeroParamRefresher {
 public:
  ZeroParamRefresher(Module& model, Communicator& comm, const ShardLayout& layout, size_t piece_bytes, DType wire);
  ~ZeroParamRefresher();

  void set_communicator(Communicator& comm);
  // Launches the refresh; returns the bytes it hands to the communicator.
  int64_t launch();
  void settle();
  // Comm and exposed seconds of refreshes finished since the last call.
  double take_comm_s() { return std::exchange(comm_s_, 0.0); }
  double take_exposed_s() { return std::exchange(exposed_s_, 0.0); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Piece {
    size_t begin = 0, end = 0;
    int owner = 0;
  };
  void wait_through(size_t piece);  // pieces [next_wait_, piece] have arrived

  Module& model_;
  Communicator* comm_;
  ShardLayout layout_;
  DType wire_;
  std::vector<Piece> pieces_;
  std::vector<size_t> due_;                     // per layer: 1 + its last piece (0: no parameters)
  std::vector<WorkPtr> works_;                  // per piece, while a refresh is in flight
  std::vector<std::vector<uint16_t>> staged_;   // 16-bit wire: per piece
  size_t next_wait_ = 0;                        // pieces below this have arrived
  Clock::time_point launched_;
  Clock::time_point done_;                      // set by the last piece's completion (worker thread)
  double comm_s_ = 0, exposed_s_ = 0;
};

}  // namespace dpt
