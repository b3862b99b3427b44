#pragma once
// GPT-2's pre-tokenisation: the text is cut into *pieces*, each encoded by BPE on its own,
// exactly where the JavaScript regular expression of the gpt-3-encoder package
//   /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu
// cuts it (character classes as in char_class.h). At each position, in order:
//   1. a contraction: an apostrophe followed by s, t, re, ve, m, ll or d (lower case);
//   2. an optional U+0020 followed by a maximal run of letters, of numbers, or of "other"
//      characters (the class of the first character after the optional space decides);
//   3. a whitespace run: to the end of the text if it ends there; otherwise all of it but
//      its last code point when it has two or more (so that one space stays to prefix the
//      word that follows); a single whitespace code point on its own.
// The input must be well-formed UTF-8 (see utf8.h for replacing what is not).
#include <cstddef>
#include <string_view>

namespace dpt::tokenizer {

// End (byte offset) of the piece that starts at `pos` < text.size().
size_t piece_end(std::string_view text, size_t pos);

// Calls f(piece) for each piece of `text`, in order.
template <class F>
void for_each_piece(std::string_view text, F&& f) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = piece_end(text, pos);
    f(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace dpt::tokenizer
