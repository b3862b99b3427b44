#pragma once
// SyncBatchNorm over a Communicator (train --sync-bn): the BatchStatsReducer
// (models/nn/batch_stats_reducer.h) that every BatchNorm of the model calls, so batch
// statistics are those of the global batch (all ranks' samples), as
// torch.nn.SyncBatchNorm computes them on GPUs (PyTorch 1.13 refuses it on CPU tensors).
//
// Terms (per BatchNorm layer, C channels):
//   moments         this rank's [count, mean[C], m2[C]]; forward gathers every rank's
//                   with one allgather of 1 + 2C floats, and the layer combines them in
//                   rank order (the same bits on every rank).
//   gradient sums   [sum(dy)[C], sum(dy*xhat)[C]]: one allreduce(sum) of 2C floats in
//                   backward.
// Only training forwards and backwards call it, once per BatchNorm each, in the same
// order on every rank; evaluation uses the running statistics and never communicates.
// The communicator is held by pointer, as the strategies hold it: the trainer points it
// at the strategy's gradient group (ParallelStrategy::gradient_group: the world, or
// DiLoCo's inner group, so that between round ends no statistic crosses the groups) when
// the strategy is made, after a backend switch and after an elastic re-forming.
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "models/nn/batch_stats_reducer.h"

namespace dpt {

class CommBatchStatsReducer : public BatchStatsReducer {
 public:
  explicit CommBatchStatsReducer(Communicator& comm) : comm_(&comm) {}
  void set_communicator(Communicator& comm) { comm_ = &comm; }

  void gather_moments(std::span<const float> local, std::vector<float>& all) override;
  void sum_gradients(std::span<float> sums) override;

 private:
  Communicator* comm_;
};

}  // namespace dpt
