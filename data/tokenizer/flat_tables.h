#pragma once
// The tokenizer's hash tables, open addressing for its hot look-ups (a merge per BPE
// step, a word-cache probe per piece), where std::unordered_map's node per entry costs a
// cache miss. Terms: *linear probing* in a power-of-two array of slots that is at most half
// full (doubled when an insert would pass that); entries are never removed.
//   PairTable:   a 64-bit key (two token ids; all ones is reserved) -> a value.
//   StringTable: a byte string -> a 32-bit value; keys are copied into one arena string.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dpt::tokenizer {

template <class Value>
class PairTable {
 public:
  const Value* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = index(key);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  // False (and no change) if `key` is present.
  bool insert(uint64_t key, const Value& value) {
    if (find(key)) return false;
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = index(key);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask();
    slots_[i] = {key, value};
    ++size_;
    return true;
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // the key of an unused slot
  struct Slot {
    uint64_t key;
    Value value;
  };
  size_t mask() const { return slots_.size() - 1; }
  size_t index(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : 2 * old.size(), Slot{kEmpty, Value{}});
    shift_ = 64 - unsigned(__builtin_ctzll(slots_.size()));
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kEmpty) insert(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

class StringTable {
 public:
  const uint32_t* find(std::string_view key) const { return find(key, hash(key)); }
  // False (and no change) if `key` is present.
  bool insert(std::string_view key, uint32_t value);
  size_t size() const { return size_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;  // key_len of an unused slot
  struct Slot {
    uint64_t hash;
    uint32_t key_offset, key_len, value;
  };
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  const uint32_t* find(std::string_view key, uint64_t h) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (s.key_len == kEmpty) return nullptr;
      if (s.hash == h && std::string_view(keys_.data() + s.key_offset, s.key_len) == key) {
        return &s.value;
      }
    }
  }
  void place(const Slot& slot);

  std::vector<Slot> slots_;
  std::string keys_;  // every key, back to back
  size_t size_ = 0;
};

}  // namespace dpt::tokenizer
