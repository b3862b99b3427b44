// BatchStatsReducer: how a BatchNorm layer reaches the other replicas' batches
// (SyncBatchNorm) without models/ knowing about communicators. optim/ implements it
// over a Communicator; tests implement it over threads. With none set on the Module,
// BatchNorm normalises over this process's batch alone (plain BatchNorm).
//
// Terms (per BatchNorm layer, C channels):
//   moments   this rank's [count, mean[0..C), m2[0..C)]: count = values per channel
//             (N*H*W), mean and m2 = sum of squared deviations from that mean. Means and
//             m2 rather than sums and sums of squares, so combining them (Chan et al.)
//             loses nothing to cancellation when a channel's mean is large.
//   gradient sums  [sum(dy)[0..C), sum(dy*xhat)[0..C)] of this rank.
//
// Every rank calls the same functions in the same order (one gather per BatchNorm
// forward in training, one sum per BatchNorm backward), so a collective implementation
// is safe. Evaluation (Module::forward with training = false) calls neither.
#pragma once

#include <span>
#include <vector>

namespace dpt {

class BatchStatsReducer {
 public:
  virtual ~BatchStatsReducer() = default;
  // Forward: `local` is this rank's moments (1 + 2C floats, the same length on every
  // rank). Returns every rank's moments, concatenated in rank order, in `all`.
  virtual void gather_moments(std::span<const float> local, std::vector<float>& all) = 0;
  // Backward: sums `sums` (2C floats) over all ranks, in place.
  virtual void sum_gradients(std::span<float> sums) = 0;
};

}  // namespace dpt
