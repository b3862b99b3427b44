#pragma once
// GPT-2's tokenizer: text -> token ids and back, the same ids as OpenAI's encoder.py,
// Hugging Face's GPT2Tokenizer and the gpt-3-encoder npm package. Terms:
//   encode: ill-formed UTF-8 is first replaced by U+FFFD per maximal subpart, as Node
//           reads a file (utf8.h); the text is cut into pieces (pretokenize.h); each piece
//           becomes tokens by BPE (bpe.h). The text is taken as plain text: the characters
//           "<|endoftext|>" in it are ordinary characters, not the special token.
//   decode: the concatenated bytes of the tokens, exactly; decode(encode(x)) == x for
//           well-formed UTF-8 x.
//   word cache: the tokens of each piece already encoded (the pieces of a language repeat
//           a lot), up to `cache_entries` pieces; once full it stops growing. Pieces of
//           one byte or of more than kMaxCachedPiece bytes skip it. This makes encode
//           non-const: one tokenizer per thread.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/bpe.h"
#include "data/tokenizer/flat_tables.h"
#include "data/tokenizer/vocabulary.h"

namespace dpt::tokenizer {

// The directory tools/install_deps.sh fills with GPT-2's vocabulary: <source>/third_party/gpt2
// (CMake's DPT_GPT2_TOKENIZER_DIR at build time). Programs take it as --tokenizer's default.
std::string default_tokenizer_dir();

class Gpt2Tokenizer {
 public:
  static constexpr size_t kDefaultCacheEntries = size_t(1) << 18;
  static constexpr size_t kMaxCachedPiece = 128;  // bytes

  // Reads the vocabulary from `dir` (Vocabulary::load; DataError on problems).
  explicit Gpt2Tokenizer(const std::string& dir, size_t cache_entries = kDefaultCacheEntries);
  explicit Gpt2Tokenizer(Vocabulary vocab, size_t cache_entries = kDefaultCacheEntries);

  // Appends the ids of `text` to `out`.
  void encode(std::string_view text, std::vector<int32_t>& out);
  std::vector<int32_t> encode(std::string_view text) {
    std::vector<int32_t> ids;
    encode(text, ids);
    return ids;
  }
  // Appends the bytes of `ids` to `out`; throws std::out_of_range naming the first id that
  // is not in the vocabulary, and its position.
  void decode(std::span<const int32_t> ids, std::string& out) const;
  std::string decode(std::span<const int32_t> ids) const {
    std::string s;
    decode(ids, s);
    return s;
  }

  const Vocabulary& vocab() const { return *vocab_; }
  // Id of <|endoftext|> (50256 in GPT-2); throws DataError if the vocabulary lacks it.
  int32_t end_of_text() const;
  size_t cache_size() const { return cache_.size(); }

 private:
  struct Span {
    uint32_t offset, count;  // into cached_ids_
  };
  void encode_piece(std::string_view piece, std::vector<int32_t>& out);

  std::shared_ptr<const Vocabulary> vocab_;  // shared: bpe_ points into it across moves
  BpeEncoder bpe_;
  size_t cache_entries_;
  StringTable cache_;         // piece -> index into spans_
  std::vector<Span> spans_;
  std::vector<int32_t> cached_ids_;
  std::string repaired_;  // the text with ill-formed UTF-8 replaced, when it had some
};

}  // namespace dpt::tokenizer
