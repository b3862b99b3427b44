#pragma once
// Byte-pair encoding of one piece (pretokenize.h). Terms: the piece starts as one
// *symbol* per byte (its single-byte token); a *pair* is two neighbouring symbols. BPE
// repeatedly joins the pair whose merge has the lowest rank, the leftmost such pair first,
// until no neighbouring pair has a merge; the symbols left are the piece's tokens.
//
// GPT-2's reference code joins every occurrence of the best pair in one left-to-right
// pass, then looks again. Here a min-heap of (rank, position) holds each pair that has a
// merge; entries made stale by a join are skipped when popped. The two orders agree
// because no merge can have a lower rank than the merges that made its tokens (checked
// when the vocabulary loads), and a heap keeps a long piece (a line of 10^5 letters) at
// O(n log n) where rescanning would be O(n^2).
#include <cstdint>
#include <string_view>
#include <vector>

#include "data/tokenizer/vocabulary.h"

namespace dpt::tokenizer {

class BpeEncoder {
 public:
  explicit BpeEncoder(const Vocabulary& vocab) : vocab_(&vocab) {}
  // Appends the tokens of `piece` (non-empty bytes) to `out`.
  void encode(std::string_view piece, std::vector<int32_t>& out);

 private:
  struct Candidate {
    int32_t rank;
    int32_t pos;    // index of the pair's left symbol
    int32_t left;   // the ids the pair had when pushed, to recognise stale entries
    int32_t right;
    int32_t result;  // the merged token
  };
  void push_pair(int32_t pos);

  const Vocabulary* vocab_;
  // Workspace, reused from piece to piece: symbol ids and a doubly linked list over them
  // (-1 ends it; a joined-away symbol has id -1).
  std::vector<int32_t> id_, prev_, next_;
  std::vector<Candidate> heap_;
};

}  // namespace dpt::tokenizer
