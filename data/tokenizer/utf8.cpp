#include "data/tokenizer/utf8.h"

#include <cstring>

namespace dpt::tokenizer {

namespace {

// The allowed range of the second byte after a given lead byte (Table 3-7); later bytes
// are always 80..BF. Returns the sequence length, or 0 for a byte that cannot lead.
int lead_info(unsigned b, unsigned& lo, unsigned& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b == 0xE0) lo = 0xA0;       // below: overlong
  if (b == 0xED) hi = 0x9F;       // above: surrogates
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b == 0xF0) lo = 0x90;       // below: overlong
  if (b == 0xF4) hi = 0x8F;       // above: beyond U+10FFFF
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

bool all_ascii(const unsigned char* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w & 0x8080808080808080ull) return false;
  }
  for (; i < n; ++i) {
    if (p[i] & 0x80) return false;
  }
  return true;
}

}  // namespace

std::optional<char32_t> decode_code_point(std::string_view s, size_t& pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned b = p[pos];
  unsigned lo, hi;
  const int len = lead_info(b, lo, hi);
  if (len == 1) return char32_t(p[pos++]);
  if (len == 0) {
    ++pos;
    return std::nullopt;
  }
  char32_t cp = b & (0x7F >> len);
  size_t i = pos + 1;
  for (int k = 1; k < len; ++k, ++i) {
    if (i >= s.size() || p[i] < lo || p[i] > hi) {
      pos = i;  // the maximal subpart ends before the byte that broke it
      return std::nullopt;
    }
    cp = (cp << 6) | (p[i] & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  pos = i;
  return cp;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

std::optional<size_t> first_ill_formed(std::string_view s) {
  if (all_ascii(reinterpret_cast<const unsigned char*>(s.data()), s.size())) return std::nullopt;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    if (!decode_code_point(s, pos)) return start;
  }
  return std::nullopt;
}

void replace_ill_formed(std::string_view s, std::string& out) {
  out.clear();
  out.reserve(s.size() + 16);
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    if (decode_code_point(s, pos)) {
      out.append(s.data() + start, pos - start);
    } else {
      append_utf8(kReplacementChar, out);
    }
  }
}

}  // namespace dpt::tokenizer
