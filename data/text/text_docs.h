#pragma once
// Documents as samples, the way Hugging Face fine-tuning tutorials feed GPT-2: one sample
// per document (documents.h), tokenized once when the dataset is built. Terms:
//   sample:  the document's first seq_len tokens (truncation), right-padded to seq_len
//            with the pad id. GPT-2 has no pad token; like the tutorials
//            (tokenizer.pad_token = tokenizer.eos_token) we pad with <|endoftext|> (50256).
//   labels:  Hugging Face's labels=input_ids, shifted here rather than in the model:
//            labels[t] = tokens[t + 1] while t + 1 is a real token of the document, and
//            kIgnoreLabel (batch.h) elsewhere: at the document's last token and at every
//            padded position. So a document of L <= seq_len tokens has L - 1 targets, and
//            padding never counts in the loss. Right padding needs no attention mask: a
//            causal model's real positions never look at the pads after them.
//   split:   a deterministic held-out slice spread over the file: with documents numbered
//            i = 0, 1, ... in file order and f = val_fraction, document i is held out
//            (Split::test) when floor((i+1) f) > floor(i f): for f = 0.1 documents
//            9, 19, 29, ..., floor(n f) in all (every (1/f)-th document when 1/f is
//            whole; f = 0.25: 3, 7, 11, ...). The rest train. A split with no document
//            is an error, as is f outside [0, 1).
//            With a validation file (val_path), the split is by file instead: Split::train
//            is every document of `path`, Split::test every document of val_path, read in
//            the same format (as the tutorials train on SQuAD's train file and evaluate
//            on its validation file); val_fraction is then unused.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/text/documents.h"
#include "data/tokenizer/tokenizer.h"

namespace dpt {

struct TextDocsOptions {
  std::string path;            // file or directory; empty: kFortunesDir as fortunes
  std::string format;          // "lines" | "jsonl" | "fortunes" | "" (parse_doc_format)
  std::string jsonl_field;     // the field of each JSON line (jsonl)
  std::string tokenizer_dir;   // empty: tokenizer::default_tokenizer_dir()
  size_t seq_len = 64;
  double val_fraction = 0.1;
  std::string val_path;        // set: the held-out documents are this file's, all of them
};

class TextDocs : public Dataset {
 public:
  TextDocs(const TextDocsOptions& options, Split split);
  // From documents in memory (tests), with a tokenizer already loaded.
  TextDocs(const std::vector<std::string>& documents, tokenizer::Gpt2Tokenizer& tok, Split split,
           size_t seq_len, double val_fraction = 0.1, std::string name = "text-docs");

  size_t size() const override { return offsets_.size() - 1; }
  // tokens and labels: [n, seq_len] (see the terms above); sample_shape {seq_len}.
  void fill(std::span<const size_t> indices, Batch& out) const override;
  std::string name() const override { return name_; }
  bool has_ignored_targets() const override { return true; }

  size_t seq_len() const { return seq_len_; }
  size_t vocab_size() const { return vocab_size_; }
  int32_t pad_id() const { return pad_id_; }
  // The kept (truncated) tokens of sample i.
  std::span<const int32_t> document_tokens(size_t i) const {
    return {tokens_.data() + offsets_[i], offsets_[i + 1] - offsets_[i]};
  }
  size_t num_truncated() const { return num_truncated_; }  // samples cut to seq_len

 private:
  // whole_file: every document belongs to `split` (a validation file's split).
  void build(const std::vector<std::string>& documents, tokenizer::Gpt2Tokenizer& tok, Split split,
             double val_fraction, bool whole_file = false);

  std::string name_;
  size_t seq_len_;
  size_t vocab_size_ = 0;
  int32_t pad_id_ = 0;
  std::vector<int32_t> tokens_;   // every sample's kept tokens, back to back
  std::vector<size_t> offsets_;   // sample i is tokens_[offsets_[i] .. offsets_[i+1])
  size_t num_truncated_ = 0;
};

}  // namespace dpt
