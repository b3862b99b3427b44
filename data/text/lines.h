#pragma once
// Lines of a text in memory. Terms: a *line* is what lies between two '\n' bytes, or
// between one and an end of the text; a final '\n' ends the last line rather than
// starting an empty one. The line handed on excludes its '\n' (a '\r' before it stays).
#include <cstddef>
#include <string_view>

namespace dpt {

// Calls f(line, line_number) for each line, numbered from 1.
template <class F>
void for_each_line(std::string_view text, F&& f) {
  size_t pos = 0, line_no = 1;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    f(text.substr(pos, eol - pos), line_no++);
    pos = eol + 1;
  }
}

}  // namespace dpt
