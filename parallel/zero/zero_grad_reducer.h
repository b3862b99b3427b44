#pragma once
// ZeRO-2/3 gradient synchronization: the reduce-scatter of the flat gradient buffer,
// done bucket by bucket while backward runs (bucket_scheduler.h decides when), so
// each rank ends with only the averaged gradient of its own shard.
//
// Terms:
//   bucket   as in DDP (bucket_plan.h): whole parameters in REVERSE order, a small
//            first one, then up to bucket_bytes.
//   piece    a bucket cut at shard boundaries (ShardLayout), so each piece lies in
//            exactly one owner's shard. A piece is reduced (avg) to its owner, straight
//            into the owner's gradient shard buffer. The pieces of all buckets tile
//            [0, P), so together they are exactly a reduce-scatter of the flat buffer.
//   complete after a bucket's reduces finished (checked in launch order, on the
//            compute thread, during backward and at its end), its slice of the model's
//            flat gradient buffer is released (models/kernels/cpu/page_memory.h): the model must write its
//            gradients into one flat buffer, but the full gradients do not stay
//            resident beyond their bucket. The buffer is all zeros when the step ends,
//            so the strategy skips zero_grad() (which would touch every page).
//   wire     f32, or bf16/f16 (--grad-compress, or --precision bf16): the bucket is
//            divided by N and rounded into a 16-bit copy that is reduced (sum) in
//            place; the owner widens its pieces into its fp32 shard when complete.
//   no_sync  micro-steps of gradient accumulation: gradients add up in the flat buffer
//            and nothing is communicated or released (begin_backward(false)).
//   device   device-resident ZeRO-2 (--optimizer-device cuda): the pieces are reduced from
//            the model's device gradients straight into the owner's device shard (NCCL
//            natively, staged by tcp and mpi); f32 only; nothing is released (the
//            device buffer is zeroed by the next zero_grad) and nothing comes down.
#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "models/nn/module.h"
#include "parallel/bucket_scheduler.h"
#include "parallel/ddp/grad_allreduce.h"
#include "parallel/shard_layout.h"

namespace dpt {

class ZeroGradReducer {
 public:
  // grad_shard: this rank's S-element gradient shard, written by the reduces; with
  // device_grad_shard (S device floats) the reduces write there instead (device, above).
  ZeroGradReducer(Module& model, Communicator& comm, const ShardLayout& layout, const DdpConfig& config,
                  std::span<float> grad_shard, float* device_grad_shard = nullptr);

  void set_communicator(Communicator& comm);
  void begin_backward(bool sync) { scheduler_.begin_backward(sync); }
  // Launches what is left, waits for everything and releases every bucket's slice.
  CommStats end_backward() { return scheduler_.end_backward(comm_->wait_timeout()); }
  size_t num_buckets() const { return scheduler_.num_buckets(); }

 private:
  struct Piece {
    size_t begin = 0, end = 0;  // flat element range, inside one shard
    int owner = 0;
  };
  int64_t launch(size_t i, const BucketRange& b, std::vector<WorkPtr>& works);
  void complete(size_t i, const BucketRange& b);

  Module& model_;
  Communicator* comm_;
  ShardLayout layout_;
  DdpConfig config_;
  std::span<float> grad_shard_;
  float* device_grad_shard_ = nullptr;         // device mode
  std::vector<std::vector<Piece>> pieces_;     // per bucket
  std::vector<std::vector<uint16_t>> wire_;    // per bucket: the 16-bit copy while in flight
  BucketScheduler scheduler_;
};

}  // namespace dpt
