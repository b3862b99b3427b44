// TokenGroups: the positions of a batch's token ids grouped by id, for an embedding
// backward without atomics on a GPU (gpu::embedding_backward): each distinct id's rows of
// dy are added by one thread per channel, in increasing position order, which is the
// order the host loop adds them in, so the GPU's table gradient has the CPU's bits.
//
// Terms (count = the batch's n * T positions, distinct = how many ids occur):
//   order   [count]         positions sorted by id, ties in increasing position
//                           (a stable counting sort over the vocabulary)
//   starts  [distinct + 1]  group g is order[starts[g] .. starts[g + 1])
//   ids     [distinct]      group g's token id, increasing
// words() lays the three out back to back in that order: one upload per step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dpt {

class TokenGroups {
 public:
  // Ids must lie in [0, vocab) (the embedding checks them first; here an id outside
  // throws std::out_of_range naming the position).
  void build(std::span<const int32_t> tokens, int64_t vocab);
  int distinct() const { return distinct_; }
  int count() const { return count_; }
  std::span<const int32_t> order() const { return {words_.data(), size_t(count_)}; }
  std::span<const int32_t> starts() const { return {words_.data() + count_, size_t(distinct_) + 1}; }
  std::span<const int32_t> ids() const { return {words_.data() + count_ + distinct_ + 1, size_t(distinct_)}; }
  const std::vector<int32_t>& words() const { return words_; }

 private:
  std::vector<int32_t> words_;
  std::vector<int32_t> per_id_;  // scratch: occurrences, then first slot, per id
  int count_ = 0, distinct_ = 0;
};

}  // namespace dpt
