#include "data/tokenizer/pretokenize.h"

#include "data/tokenizer/char_class.h"
#include "data/tokenizer/utf8.h"

namespace dpt::tokenizer {

namespace {

// Class of the code point at s[i] and its length in bytes; ASCII without a call.
inline CharClass class_at(const unsigned char* s, size_t i, size_t& len) {
  if (s[i] < 0x80) {
    len = 1;
    return kAsciiClass[s[i]];
  }
  const unsigned char* p = s + i;
  const char32_t cp = decode_well_formed(p);
  len = size_t(p - (s + i));
  return char_class(cp);
}

// Length of a contraction ('s 't 're 've 'm 'll 'd) at s[pos], or 0.
inline size_t contraction_length(const unsigned char* s, size_t n, size_t pos) {
  if (s[pos] != '\'' || pos + 1 >= n) return 0;
  const unsigned c = s[pos + 1];
  if (c == 's' || c == 't' || c == 'm' || c == 'd') return 2;
  if (pos + 2 >= n) return 0;
  const unsigned c2 = s[pos + 2];
  if ((c == 'r' && c2 == 'e') || (c == 'v' && c2 == 'e') || (c == 'l' && c2 == 'l')) return 3;
  return 0;
}

}  // namespace

size_t piece_end(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  if (const size_t c = contraction_length(s, n, pos)) return pos + c;

  size_t len;
  size_t start = pos;
  CharClass cls = class_at(s, pos, len);
  if (s[pos] == ' ' && pos + 1 < n) {  // " ?" before a letter, number or other run
    size_t next_len;
    const CharClass next = class_at(s, pos + 1, next_len);
    if (next != CharClass::space) {
      start = pos + 1;
      cls = next;
      len = next_len;
    }
  }
  size_t i = start + len;
  if (cls != CharClass::space) {
    while (i < n) {
      size_t l;
      if (class_at(s, i, l) != cls) break;
      i += l;
    }
    return i;
  }
  // Whitespace: \s+(?!\S) backs off one code point when a non-space follows; \s+ takes
  // a lone whitespace code point.
  size_t last = pos;  // start of the run's last code point
  while (i < n) {
    size_t l;
    if (class_at(s, i, l) != CharClass::space) break;
    last = i;
    i += l;
  }
  if (i == n) return n;
  return last > pos ? last : i;
}

}  // namespace dpt::tokenizer
