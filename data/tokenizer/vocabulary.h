#pragma once
// A GPT-2 byte-level BPE vocabulary, read from the files GPT-2 is published with. Terms:
//   token:  an id (0 .. size-1) and the bytes it stands for. The files write a token's
//           bytes as byte symbols (byte_symbols.h), e.g. "Ġthe" for " the".
//   merge:  a line "A B" of the merges file: the tokens A and B, next to each other, may
//           join into the token AB. Its *rank* is its line's position among the merges (0
//           first); BPE always applies the lowest-ranked merge available.
//   files:  vocab.json + merges.txt (Hugging Face's names) or encoder.json + vocab.bpe
//           (OpenAI's names; the same content). The JSON maps token text to id; the
//           merges file has an optional first line "#version: ..." then one merge a line.
// Loading checks what encoding relies on and names the file and line of any problem:
// ids are 0..size-1 without gaps or repeats, all 256 single-byte tokens exist, each merge
// has two known tokens and a known result, and each merge's tokens are single bytes or
// results of earlier merges (true of every trained BPE, and what lets bpe.h apply merges
// in rank order without rescanning).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/flat_tables.h"

namespace dpt::tokenizer {

// GPT-2's one special token, id 50256 in its vocabulary.
inline constexpr std::string_view kEndOfText = "<|endoftext|>";

struct Merge {
  int32_t rank;    // position in the merges file
  int32_t result;  // id of the joined token
};

class Vocabulary {
 public:
  // Finds the files in `dir` (vocab.json + merges.txt, else encoder.json + vocab.bpe).
  // Throws DataError naming the directory or the file and line that is wrong.
  static Vocabulary load(const std::string& dir);
  static Vocabulary load_files(const std::string& json_path, const std::string& merges_path);

  size_t size() const { return token_bytes_.size(); }
  std::string_view token_bytes(int32_t id) const { return token_bytes_[size_t(id)]; }
  std::optional<int32_t> find(std::string_view bytes) const {
    const uint32_t* id = ids_.find(bytes);
    return id ? std::optional<int32_t>(int32_t(*id)) : std::nullopt;
  }
  int32_t byte_token(uint8_t b) const { return byte_token_[b]; }
  // The merge of tokens `left` then `right`, or nullptr if they do not merge.
  const Merge* merge(int32_t left, int32_t right) const {
    return merges_.find(pair_key(left, right));
  }
  size_t num_merges() const { return merges_.size(); }
  // The id of <|endoftext|>, if the vocabulary has it.
  std::optional<int32_t> end_of_text() const { return find(kEndOfText); }
  // Where it was read from, for messages.
  const std::string& source() const { return source_; }

 private:
  static uint64_t pair_key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
  void read_tokens(const std::string& json_path);
  void read_merges(const std::string& merges_path);

  std::string source_;
  std::vector<std::string> token_bytes_;               // by id
  StringTable ids_;                                    // bytes -> id
  std::vector<int32_t> byte_token_ = std::vector<int32_t>(256, -1);
  PairTable<Merge> merges_;                            // (left, right) -> merge
};

}  // namespace dpt::tokenizer
