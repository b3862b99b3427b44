#include "data/tokenizer/char_class.h"

#include <unicode/uchar.h>

#include <array>

namespace dpt::tokenizer {

namespace {

CharClass classify_with_icu(char32_t cp) {
  const UChar32 c = UChar32(cp);
  const uint32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return CharClass::letter;
  if (mask & U_GC_N_MASK) return CharClass::number;
  if (mask & U_GC_ZS_MASK) return CharClass::space;
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:  // TAB LF VT FF CR
    case 0x2028: case 0x2029:                               // line and paragraph separators
    case 0xFEFF:                                            // zero-width no-break space
      return CharClass::space;
    default:
      return CharClass::other;
  }
}

}  // namespace

CharClass char_class(char32_t cp) {
  if (cp < 128) return kAsciiClass[cp];
  // The Basic Multilingual Plane from a table filled once (65536 ICU look-ups, well under
  // a millisecond); the supplementary planes, rarer in text, straight from ICU.
  static const std::array<CharClass, 0x10000> bmp = [] {
    std::array<CharClass, 0x10000> t{};
    for (char32_t c = 0; c < 0x10000; ++c) t[c] = classify_with_icu(c);
    return t;
  }();
  if (cp < 0x10000) return bmp[cp];
  return classify_with_icu(cp);
}

}  // namespace dpt::tokenizer
