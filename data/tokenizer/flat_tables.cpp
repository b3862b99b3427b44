#include "data/tokenizer/flat_tables.h"

namespace dpt::tokenizer {

void StringTable::place(const Slot& slot) {
  size_t i = slot.hash & (slots_.size() - 1);
  while (slots_[i].key_len != kEmpty) i = (i + 1) & (slots_.size() - 1);
  slots_[i] = slot;
}

bool StringTable::insert(std::string_view key, uint32_t value) {
  const uint64_t h = hash(key);
  if (find(key, h)) return false;
  if (2 * (size_ + 1) > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : 2 * old.size(), Slot{0, 0, kEmpty, 0});
    for (const Slot& s : old) {
      if (s.key_len != kEmpty) place(s);
    }
  }
  place({h, uint32_t(keys_.size()), uint32_t(key.size()), value});
  keys_.append(key);
  ++size_;
  return true;
}

}  // namespace dpt::tokenizer
