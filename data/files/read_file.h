#pragma once
// Whole-file reads for the datasets and the tokenizer: the bytes as they are on disk, or
// as a pipe, FIFO or /dev/stdin delivers them to their end.
// Errors are DataError naming the file.
#include <cstdint>
#include <string>
#include <vector>

namespace dpt {

// Appends the file's bytes to `out`.
void append_file(const std::string& path, std::vector<uint8_t>& out);
void append_file(const std::string& path, std::string& out);

inline std::string read_file(const std::string& path) {
  std::string s;
  append_file(path, s);
  return s;
}

}  // namespace dpt
