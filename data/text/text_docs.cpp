#include "data/text/text_docs.h"

#include <cmath>
#include <stdexcept>

#include "data/text/text_corpus.h"

namespace dpt {

namespace {

bool held_out(size_t i, double f) {
  return std::floor(double(i + 1) * f) > std::floor(double(i) * f);
}

}  // namespace

TextDocs::TextDocs(const TextDocsOptions& o, Split split)
    : name_(std::string("text-docs/") + split_name(split)), seq_len_(o.seq_len) {
  const std::string path = o.path.empty() ? kFortunesDir : o.path;
  const DocFormat format = parse_doc_format(o.format, path, o.jsonl_field);
  tokenizer::Gpt2Tokenizer tok(o.tokenizer_dir.empty() ? tokenizer::default_tokenizer_dir()
                                                       : o.tokenizer_dir);
  if (!o.val_path.empty()) {  // the split is by file: each file whole
    const std::string& file = split == Split::test ? o.val_path : path;
    build(read_documents(file, format, o.jsonl_field), tok, split, 0.0, true);
    return;
  }
  build(read_documents(path, format, o.jsonl_field), tok, split, o.val_fraction);
}

TextDocs::TextDocs(const std::vector<std::string>& documents, tokenizer::Gpt2Tokenizer& tok,
                   Split split, size_t seq_len, double val_fraction, std::string name)
    : name_(std::move(name) + "/" + split_name(split)), seq_len_(seq_len) {
  build(documents, tok, split, val_fraction);
}

void TextDocs::build(const std::vector<std::string>& documents, tokenizer::Gpt2Tokenizer& tok,
                     Split split, double f, bool whole_file) {
  if (seq_len_ < 2) {
    throw std::invalid_argument(name_ + ": seq_len must be at least 2 (one input, one target), got " +
                                std::to_string(seq_len_));
  }
  if (!(f >= 0.0 && f < 1.0)) {
    throw std::invalid_argument(name_ + ": val_fraction must be in [0, 1), got " + std::to_string(f));
  }
  vocab_size_ = tok.vocab().size();
  pad_id_ = tok.end_of_text();
  offsets_.assign(1, 0);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < documents.size(); ++i) {
    if (!whole_file && held_out(i, f) != (split == Split::test)) continue;
    ids.clear();
    tok.encode(documents[i], ids);
    if (ids.size() > seq_len_) ++num_truncated_;
    tokens_.insert(tokens_.end(), ids.begin(), ids.begin() + std::ptrdiff_t(std::min(ids.size(), seq_len_)));
    offsets_.push_back(tokens_.size());
  }
  if (size() == 0) {
    throw std::invalid_argument(
        name_ + ": no documents in this split (" + std::to_string(documents.size()) +
        " documents, held-out fraction " + std::to_string(f) + " holds out " +
        std::to_string(size_t(std::floor(double(documents.size()) * f))) +
        "); use more documents or another validation fraction");
  }
}

void TextDocs::fill(std::span<const size_t> indices, Batch& out) const {
  check_indices(*this, indices);
  const size_t n = indices.size();
  out.n = n;
  out.sample_shape = {int64_t(seq_len_)};
  out.tokens.assign(n * seq_len_, pad_id_);
  out.labels.assign(n * seq_len_, kIgnoreLabel);
  out.x.clear();
  out.targets.clear();
  for (size_t b = 0; b < n; ++b) {
    const std::span<const int32_t> doc = document_tokens(indices[b]);
    int32_t* tok = out.tokens.data() + b * seq_len_;
    int32_t* lab = out.labels.data() + b * seq_len_;
    for (size_t t = 0; t < doc.size(); ++t) tok[t] = doc[t];
    for (size_t t = 0; t + 1 < doc.size(); ++t) lab[t] = doc[t + 1];
  }
}

}  // namespace dpt
