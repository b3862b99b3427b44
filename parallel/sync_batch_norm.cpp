#include "parallel/sync_batch_norm.h"

namespace dpt {

void CommBatchStatsReducer::gather_moments(std::span<const float> local, std::vector<float>& all) {
  all.resize(local.size() * size_t(comm_->size()));
  // The send buffer is only read; Buffer takes a mutable pointer for both directions.
  comm_->allgather(Buffer{const_cast<float*>(local.data()), local.size(), DType::f32, {}},
                   Buffer{all.data(), all.size(), DType::f32, {}});
}

void CommBatchStatsReducer::sum_gradients(std::span<float> sums) {
  comm_->allreduce(Buffer{sums.data(), sums.size(), DType::f32, {}}, ReduceOp::sum);
}

}  // namespace dpt
