#pragma once
// A tiny GPT-2-style vocabulary for tests: the 256 single-byte tokens (ids 0..255 in byte
// order), the merges below (id 256 + line), then <|endoftext|>. Written in GPT-2's file
// format (byte symbols, "#version" line) under either file-name convention.
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer/byte_symbols.h"

namespace dpt::testing {

// Merges in symbol form ("Ġ" is the space byte); rank = index.
inline const std::vector<std::pair<std::string, std::string>>& tiny_merges() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"h", "e"},     {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"o", "r"},
      {"Ġw", "or"},   {"l", "d"}, {"Ġwor", "ld"}, {"a", "a"},  {"Ġ", "Ġ"}, {"'", "s"}};
  return m;
}
inline int32_t tiny_merge_id(size_t rank) { return int32_t(256 + rank); }
inline int32_t tiny_eos_id() { return int32_t(256 + tiny_merges().size()); }

struct TinyVocabFiles {
  std::string json, merges;  // file contents
};

inline TinyVocabFiles tiny_vocab_files() {
  using dpt::tokenizer::bytes_to_symbols;
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      q += char(c);
    }
    return q + "\"";
  };
  TinyVocabFiles f;
  f.json = "{";
  for (int b = 0; b < 256; ++b) {
    f.json += quoted(bytes_to_symbols(std::string(1, char(b)))) + ": " + std::to_string(b) + ", ";
  }
  f.merges = "#version: 0.2\n";
  for (size_t r = 0; r < tiny_merges().size(); ++r) {
    const auto& [a, b] = tiny_merges()[r];
    f.json += quoted(a + b) + ": " + std::to_string(tiny_merge_id(r)) + ", ";
    f.merges += a + " " + b + "\n";
  }
  f.json += "\"<|endoftext|>\": " + std::to_string(tiny_eos_id()) + "}";
  return f;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Writes the vocabulary into `dir` as vocab.json + merges.txt (hugging_face) or
// encoder.json + vocab.bpe.
inline void write_tiny_vocab(const std::string& dir, bool hugging_face = true,
                             const TinyVocabFiles& files = tiny_vocab_files()) {
  write_text(dir + (hugging_face ? "/vocab.json" : "/encoder.json"), files.json);
  write_text(dir + (hugging_face ? "/merges.txt" : "/vocab.bpe"), files.merges);
}

}  // namespace dpt::testing
