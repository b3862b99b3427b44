// Prints, for every code point 0 .. U+10FFFF in order, one character: its class in
// data/tokenizer/char_class.h (L letter, N number, S space, O other; '-' for the
// surrogates, which UTF-8 cannot carry), upper case if ICU knows the code point as
// assigned, lower case if ICU's Unicode version leaves it unassigned. check_char_classes.js
// compares the string with JavaScript's \p{L}, \p{N} and \s.
#include <unicode/uchar.h>

#include <cstdio>
#include <string>

#include "data/tokenizer/char_class.h"

int main() {
  using dpt::tokenizer::CharClass;
  std::string out;
  out.reserve(0x110000);
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      out.push_back('-');
      continue;
    }
    char c = 'O';
    switch (dpt::tokenizer::char_class(cp)) {
      case CharClass::letter: c = 'L'; break;
      case CharClass::number: c = 'N'; break;
      case CharClass::space: c = 'S'; break;
      case CharClass::other: c = 'O'; break;
    }
    if (u_charType(UChar32(cp)) == U_UNASSIGNED) c = char(c - 'A' + 'a');
    out.push_back(c);
  }
  return std::fwrite(out.data(), 1, out.size(), stdout) == out.size() ? 0 : 1;
}
