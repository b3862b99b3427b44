#pragma once
// UTF-8 reading with the WHATWG Encoding Standard's error handling, the rule Node's
// Buffer#toString and TextDecoder apply. Terms: a *well-formed* sequence is one of the
// byte patterns of the Unicode Standard's Table 3-7 (no overlong forms, no surrogates,
// nothing above U+10FFFF). An *ill-formed* stretch is replaced by U+FFFD per *maximal
// subpart*: the longest prefix of a well-formed sequence that the bytes begin with, or
// else one byte. So "E2 82 41" gives U+FFFD 'A', and "ED A0 80" (a surrogate) gives three
// U+FFFD (Unicode's "substitution of maximal subparts", Table 3-8).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpt::tokenizer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Reads the sequence at s[pos] and moves pos past it. Ill-formed: returns nothing and
// moves pos past the maximal subpart (at least one byte).
std::optional<char32_t> decode_code_point(std::string_view s, size_t& pos);

// The code point of the well-formed sequence at p (no checks), moving p past it.
inline char32_t decode_well_formed(const unsigned char*& p) {
  const unsigned b = *p;
  if (b < 0x80) return char32_t(*p++);
  if (b < 0xE0) {
    const char32_t c = (char32_t(b & 0x1F) << 6) | (p[1] & 0x3F);
    p += 2;
    return c;
  }
  if (b < 0xF0) {
    const char32_t c = (char32_t(b & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    p += 3;
    return c;
  }
  const char32_t c = (char32_t(b & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
                     (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  p += 4;
  return c;
}

void append_utf8(char32_t cp, std::string& out);

// Offset of the first byte of the first ill-formed stretch, or nothing if s is well-formed.
std::optional<size_t> first_ill_formed(std::string_view s);

// Writes s into `out` with every maximal subpart of an ill-formed stretch replaced by
// U+FFFD (EF BF BD).
void replace_ill_formed(std::string_view s, std::string& out);

}  // namespace dpt::tokenizer
