#include "models/nn/token_groups.h"

#include <stdexcept>
#include <string>

namespace dpt {

void TokenGroups::build(std::span<const int32_t> tokens, int64_t vocab) {
  count_ = static_cast<int>(tokens.size());
  per_id_.assign(static_cast<size_t>(vocab), 0);
  for (size_t p = 0; p < tokens.size(); ++p) {
    const int32_t id = tokens[p];
    if (id < 0 || id >= vocab)
      throw std::out_of_range("TokenGroups: token id " + std::to_string(id) + " at position " + std::to_string(p) +
                              " outside [0, " + std::to_string(vocab) + ")");
    ++per_id_[static_cast<size_t>(id)];
  }
  distinct_ = 0;
  for (const int32_t n : per_id_) distinct_ += n > 0;
  words_.assign(size_t(count_) + 2 * size_t(distinct_) + 1, 0);
  int32_t* order = words_.data();
  int32_t* starts = order + count_;
  int32_t* ids = starts + distinct_ + 1;
  // Prefix sums over the ids that occur: per_id_ becomes each id's next free slot.
  int32_t slot = 0, g = 0;
  for (int64_t id = 0; id < vocab; ++id) {
    const int32_t n = per_id_[size_t(id)];
    if (n == 0) continue;
    starts[g] = slot;
    ids[g] = static_cast<int32_t>(id);
    ++g;
    per_id_[size_t(id)] = slot;
    slot += n;
  }
  starts[distinct_] = slot;
  for (size_t p = 0; p < tokens.size(); ++p) order[per_id_[size_t(tokens[p])]++] = static_cast<int32_t>(p);
}

}  // namespace dpt
