#include "data/tokenizer/bpe.h"

#include <algorithm>

namespace dpt::tokenizer {

namespace {

// std::push_heap builds a max-heap; "greater" puts the lowest (rank, pos) on top.
bool after(const auto& a, const auto& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

void BpeEncoder::push_pair(int32_t pos) {
  if (pos < 0) return;
  const int32_t right = next_[size_t(pos)];
  if (right < 0) return;
  const Merge* m = vocab_->merge(id_[size_t(pos)], id_[size_t(right)]);
  if (!m) return;
  heap_.push_back({m->rank, pos, id_[size_t(pos)], id_[size_t(right)], m->result});
  std::push_heap(heap_.begin(), heap_.end(), after<Candidate, Candidate>);
}

void BpeEncoder::encode(std::string_view piece, std::vector<int32_t>& out) {
  const auto n = int32_t(piece.size());
  id_.resize(size_t(n));
  prev_.resize(size_t(n));
  next_.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    id_[size_t(i)] = vocab_->byte_token(uint8_t(piece[size_t(i)]));
    prev_[size_t(i)] = i - 1;
    next_[size_t(i)] = i + 1 < n ? i + 1 : -1;
  }
  heap_.clear();
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), after<Candidate, Candidate>);
    const Candidate c = heap_.back();
    heap_.pop_back();
    const int32_t right = next_[size_t(c.pos)];
    if (id_[size_t(c.pos)] != c.left || right < 0 || id_[size_t(right)] != c.right) continue;
    // Join: the left symbol becomes the merged token, the right one leaves the list.
    id_[size_t(c.pos)] = c.result;
    id_[size_t(right)] = -1;
    const int32_t after_right = next_[size_t(right)];
    next_[size_t(c.pos)] = after_right;
    if (after_right >= 0) prev_[size_t(after_right)] = c.pos;
    push_pair(prev_[size_t(c.pos)]);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = next_[size_t(i)]) out.push_back(id_[size_t(i)]);
}

}  // namespace dpt::tokenizer
