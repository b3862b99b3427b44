#include "data/tokenizer/tokenizer.h"

#include <stdexcept>

#include "data/data_error.h"
#include "data/tokenizer/pretokenize.h"
#include "data/tokenizer/utf8.h"

namespace dpt::tokenizer {

std::string default_tokenizer_dir() { return DPT_GPT2_TOKENIZER_DIR; }

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& dir, size_t cache_entries)
    : Gpt2Tokenizer(Vocabulary::load(dir), cache_entries) {}

Gpt2Tokenizer::Gpt2Tokenizer(Vocabulary vocab, size_t cache_entries)
    : vocab_(std::make_shared<const Vocabulary>(std::move(vocab))),
      bpe_(*vocab_),
      cache_entries_(cache_entries) {}

void Gpt2Tokenizer::encode(std::string_view text, std::vector<int32_t>& out) {
  if (first_ill_formed(text)) {
    replace_ill_formed(text, repaired_);
    text = repaired_;
  }
  for_each_piece(text, [&](std::string_view piece) { encode_piece(piece, out); });
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(vocab_->byte_token(uint8_t(piece[0])));
    return;
  }
  const bool cacheable = piece.size() <= kMaxCachedPiece;
  if (const uint32_t* k = cacheable ? cache_.find(piece) : nullptr) {
    const Span span = spans_[*k];
    const int32_t* ids = cached_ids_.data() + span.offset;
    out.insert(out.end(), ids, ids + span.count);
    return;
  }
  const size_t first = out.size();
  bpe_.encode(piece, out);
  if (cacheable && cache_.size() < cache_entries_) {
    cache_.insert(piece, uint32_t(spans_.size()));
    spans_.push_back({uint32_t(cached_ids_.size()), uint32_t(out.size() - first)});
    cached_ids_.insert(cached_ids_.end(), out.begin() + std::ptrdiff_t(first), out.end());
  }
}

void Gpt2Tokenizer::decode(std::span<const int32_t> ids, std::string& out) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || size_t(ids[i]) >= vocab_->size()) {
      throw std::out_of_range("token " + std::to_string(i + 1) + " (id " + std::to_string(ids[i]) +
                              ") is not in the vocabulary (ids 0.." +
                              std::to_string(vocab_->size() - 1) + ")");
    }
    out.append(vocab_->token_bytes(ids[i]));
  }
}

int32_t Gpt2Tokenizer::end_of_text() const {
  const std::optional<int32_t> id = vocab_->end_of_text();
  if (!id) throw DataError(vocab_->source() + ": no " + std::string(kEndOfText) + " token");
  return *id;
}

}  // namespace dpt::tokenizer
