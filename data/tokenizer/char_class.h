#pragma once
// The four character classes GPT-2's split pattern distinguishes, as the JavaScript
// regular expression of the gpt-3-encoder package reads them (with the `u` flag):
//   letter: \p{L}, general category Lu Ll Lt Lm Lo;
//   number: \p{N}, general category Nd Nl No;
//   space:  ECMAScript's \s, which is NOT Unicode's White_Space property: it is TAB, VT,
//           FF, U+FEFF, LF, CR, U+2028, U+2029 and the category Zs (space separators,
//           U+0020 and U+00A0 among them). U+0085 (NEL, category Cc) is not in it;
//   other:  everything else (punctuation, symbols, marks, controls, unassigned).
// Categories come from ICU (Debian 12: ICU 72, Unicode 15.0). Code points assigned by a
// later Unicode version are "other" here but may be letters to a newer JavaScript engine.
#include <cstdint>

namespace dpt::tokenizer {

enum class CharClass : uint8_t { other, letter, number, space };

CharClass char_class(char32_t cp);

// The same, from a table for the 128 ASCII code points (no call into ICU).
inline constexpr CharClass kAsciiClass[128] = {
#define O CharClass::other
#define L CharClass::letter
#define N CharClass::number
#define S CharClass::space
    O, O, O, O, O, O, O, O, O, S, S, S, S, S, O, O,  // 00-0F: TAB LF VT FF CR
    O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O,  // 10-1F
    S, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O,  // 20-2F: space, punctuation
    N, N, N, N, N, N, N, N, N, N, O, O, O, O, O, O,  // 30-3F: digits
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,  // 40-4F: @ A-O
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,  // 50-5F: P-Z
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,  // 60-6F: ` a-o
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,  // 70-7F: p-z, DEL
#undef O
#undef L
#undef N
#undef S
};

}  // namespace dpt::tokenizer
