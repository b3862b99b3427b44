#pragma once
// ZeRO stages 1, 2 and 3 around any of our optimizers (ZeroRedundancyOptimizer).
//
// Terms (see zero_layout.h for P, N, S, shard, padding):
//   shard optimizer  an ordinary Optimizer built for S elements: it holds the optimizer
//                    state of this rank's shard only and steps it with the same code a
//                    full-buffer optimizer runs (optimizer.h says why that is exact).
//   stage 1          gradients are synchronized exactly as DDP does (bucketed
//                    allreduce avg, overlapped with backward); each rank then steps
//                    its shard of the parameters with its shard of the gradients.
//   stage 2          gradients are reduced (avg) bucket by bucket during backward into
//                    the owners' gradient shards (zero_grad_reducer.h); the full
//                    gradient does not stay resident; each rank steps its shard.
//   stage 3          as stage 2, and the parameters are sharded too: only the own shard
//                    stays resident, layers gather theirs on use (zero_param_gatherer.h);
//                    no allgather after the step (the next forward gathers).
//   allgather        stages 1, 2: after the step, an in-place allgather over the padded flat
//                    parameter buffer (rank r's slot is its shard) gives every rank
//                    the full updated parameters for the next forward.
//   comm time        gradient sync (as DDP reports it) plus the allgather, which is not
//                    overlapped with anything and so counts as exposed too.
#include <memory>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "models/module.h"
#include "optim/ddp.h"
#include "optim/optimizer.h"
#include "optim/zero_grad_reducer.h"
#include "optim/zero_layout.h"
#include "optim/zero_param_gatherer.h"

namespace dpt {

class ZeroOptimizer {
 public:
  // shard_optimizer must have been built for ShardLayout(model.num_params(), comm.size()).shard
  // elements; it stays owned by the caller (checkpoints read its state).
  ZeroOptimizer(Module& model, Communicator& comm, int stage, Optimizer& shard_optimizer, const DdpConfig& config);
  ~ZeroOptimizer();

  // Rank 0's parameters to everyone, verified by checksum (as DDP does).
  void broadcast_parameters();
  void set_communicator(Communicator& comm);
  void begin_backward(bool sync);
  void end_backward();
  // Clips by the global norm over all ranks' shards (one allreduce of a double).
  void clip_grad_norm(float max_norm);
  // Steps this rank's shard, then (stages 1, 2) allgathers the parameters.
  void step(float lr);
  // Stage 3: collective, all parameters resident on every rank (for a checkpoint),
  // and back to the own shard. No-ops in stages 1 and 2, where all are always resident.
  void gather_all_parameters();
  void release_parameters();

  int stage() const { return stage_; }
  const ShardLayout& layout() const { return layout_; }
  const CommStats& last_stats() const { return stats_; }
  size_t num_buckets() const { return ddp_ ? ddp_->num_buckets() : reducer_->num_buckets(); }
  // This rank's gradient shard as the step sees it (a view into the model's padded
  // flat gradient buffer for stage 1, the owned shard buffer for stage 2).
  std::span<float> grad_shard();
  std::span<float> param_shard();
  size_t grad_shard_bytes() const { return grad_shard_.capacity() * sizeof(float); }
  size_t comm_buffer_bytes() const { return ddp_ ? ddp_->comm_buffer_bytes() : 0; }
  size_t peak_gathered_bytes() const { return gatherer_ ? gatherer_->peak_gathered_bytes() : 0; }

 private:
  Module& model_;
  Communicator* comm_;
  int stage_;
  Optimizer& optimizer_;
  ShardLayout layout_;
  std::unique_ptr<DistributedDataParallel> ddp_;  // stage 1
  std::vector<float> grad_shard_;                 // stage 2: S elements
  std::unique_ptr<ZeroGradReducer> reducer_;      // stages 2, 3
  std::unique_ptr<ZeroParamGatherer> gatherer_;   // stage 3
  CommStats stats_;
};

}  // namespace dpt
