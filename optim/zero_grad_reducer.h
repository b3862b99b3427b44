#pragma once
// ZeRO-2 gradient synchronization: the reduce-scatter of the flat gradient buffer,
// done bucket by bucket while backward runs, so each rank ends with only the averaged
// gradient of its own shard.
//
// Terms:
//   bucket   as in DDP: whole parameters in REVERSE order (the order backward makes
//            them final), a small first one, then up to bucket_bytes. Launched as soon
//            as all its parameters reported on_grad_ready (overlap on), or all after
//            backward (overlap off); always in the same order on every rank.
//   piece    a bucket cut at shard boundaries (ShardLayout), so each piece lies in
//            exactly one owner's shard. A piece is reduced (avg) to its owner, straight
//            into the owner's gradient shard buffer. The pieces of all buckets tile
//            [0, P), so together they are exactly a reduce-scatter of the flat buffer.
//   reap     after a bucket's reduces completed (checked in issue order, on the
//            compute thread, at every on_grad_ready and in end_backward), its slice of
//            the model's flat gradient buffer is released (zero_pages.h): the model
//            must write its gradients into one flat buffer, but the full gradients do
//            not stay resident beyond their bucket. The buffer is all zeros when the
//            step ends, so the trainer skips zero_grad() (which would touch every page).
//   wire     f32, or bf16/f16 (--grad-compress, or --precision bf16): the bucket is
//            divided by N and rounded into a 16-bit copy that is reduced (sum) in
//            place; the owner widens its pieces into its fp32 shard once they arrived.
//   no_sync  micro-steps of gradient accumulation: gradients add up in the flat buffer
//            and nothing is communicated or released (begin_backward(false)).
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "models/module.h"
#include "optim/ddp.h"
#include "optim/zero_layout.h"

namespace dpt {

class ZeroGradReducer {
 public:
  // grad_shard: this rank's S-element gradient shard, written by the reduces.
  ZeroGradReducer(Module& model, Communicator& comm, const ShardLayout& layout, const DdpConfig& config,
                  std::span<float> grad_shard);
  ~ZeroGradReducer();

  void set_communicator(Communicator& comm);
  void begin_backward(bool sync);
  // Launches what is left, waits for everything and releases every bucket's slice.
  void end_backward();
  const CommStats& last_stats() const { return stats_; }
  size_t num_buckets() const { return buckets_.size(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Piece {
    size_t begin = 0, end = 0;  // flat element range, inside one shard
    int owner = 0;
  };
  struct Bucket {
    size_t begin = 0, end = 0;
    size_t pending = 0, num_params = 0;
    std::vector<Piece> pieces;
    std::vector<WorkPtr> works;
    std::vector<uint16_t> wire;  // 16-bit wire: the bucket's rounded copy, while in flight
    bool reaped = false;
    Clock::time_point launched, done;
  };
  void on_grad_ready(const ParamInfo& p);
  void launch(Bucket& b);
  void reap_finished(bool wait);

  Module& model_;
  Communicator* comm_;
  ShardLayout layout_;
  DdpConfig config_;
  std::span<float> grad_shard_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_param_;
  bool sync_ = true;
  size_t next_launch_ = 0, next_reap_ = 0;
  CommStats stats_;
};

}  // namespace dpt
