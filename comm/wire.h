#pragma once
// Little-endian encoding helpers for the wire formats (store protocol, tcp frames).
// Every reader checks bounds and throws WireError instead of reading past the end, so a
// parser fed garbage fails cleanly.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dpt::wire {

class WireError : public std::runtime_error { using std::runtime_error::runtime_error; };

inline void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
inline void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void put_i64(std::string& out, int64_t v) { put_u64(out, static_cast<uint64_t>(v)); }

inline uint32_t load_u32(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}
inline uint64_t load_u64(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}
inline void store_u32(void* p, uint32_t v) {
  auto* b = static_cast<unsigned char*>(p);
  for (int i = 0; i < 4; ++i) b[i] = static_cast<unsigned char>((v >> (8 * i)) & 0xff);
}
inline void store_u64(void* p, uint64_t v) {
  auto* b = static_cast<unsigned char*>(p);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>((v >> (8 * i)) & 0xff);
}

// Bounds-checked sequential reader over a byte string.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  uint8_t u8() { need(1); return static_cast<uint8_t>(s_[pos_++]); }
  uint32_t u32() { need(4); uint32_t v = load_u32(s_.data() + pos_); pos_ += 4; return v; }
  uint64_t u64() { need(8); uint64_t v = load_u64(s_.data() + pos_); pos_ += 8; return v; }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  // A u32 length then that many bytes; the length must not exceed `max_len`.
  std::string str(uint32_t max_len) {
    uint32_t n = u32();
    if (n > max_len) throw WireError("string of " + std::to_string(n) + " bytes exceeds the limit of " + std::to_string(max_len));
    need(n);
    std::string v(s_.substr(pos_, n));
    pos_ += n;
    return v;
  }
  bool at_end() const { return pos_ == s_.size(); }
  void expect_end() const {
    if (!at_end()) throw WireError(std::to_string(s_.size() - pos_) + " unexpected trailing bytes");
  }

 private:
  void need(size_t n) const {
    if (s_.size() - pos_ < n) throw WireError("truncated message");
  }
  std::string_view s_;
  size_t pos_ = 0;
};

inline void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

}  // namespace dpt::wire
