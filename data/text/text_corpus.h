#pragma once
// A text corpus for byte-level language models. Terms: the *corpus* is a byte string and
// the vocabulary is the 256 byte values. The *split* cuts it once: the first
// (1 - val_fraction) of the bytes train, the last val_fraction validate, so no window
// straddles the two. A *window* is seq_len + 1 consecutive bytes starting at a multiple of
// `stride`; sample i gives tokens = window[0 .. seq_len) and labels = window[1 .. seq_len],
// i.e. each label is the byte that follows its token.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace dpt {

// Debian's fortunes package: plain-text files plus .dat/.u8 index files we skip.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// A file is read as is; a directory is the concatenation of its regular files in name
// order, skipping hidden files, symlinks, subdirectories and the *.dat / *.u8 files of
// fortune(6). Throws DataError if nothing readable is found.
std::vector<uint8_t> read_text_corpus(const std::string& path);
// The files read_text_corpus reads, in that order (`path` itself if it is not a directory).
std::vector<std::string> text_corpus_files(const std::string& path);

// Entropy of the byte frequency distribution, -sum p log p, in nats per byte: the loss of
// the best model that ignores context, the yardstick for a language model's loss.
double unigram_entropy(std::span<const uint8_t> bytes);

class TextCorpus : public Dataset {
 public:
  static constexpr int kVocabSize = 256;

  // `path` empty means kFortunesDir. `stride` 0 means seq_len (non-overlapping windows).
  TextCorpus(const std::string& path, Split split, size_t seq_len, double val_fraction = 0.1,
             size_t stride = 0);
  // From bytes already in memory (tests, generated text).
  TextCorpus(std::vector<uint8_t> corpus, Split split, size_t seq_len, double val_fraction = 0.1,
             size_t stride = 0, std::string name = "text");

  size_t size() const override { return num_windows_; }
  // tokens and labels: [n, seq_len] byte values; sample_shape {seq_len}.
  void fill(std::span<const size_t> indices, Batch& out) const override;
  std::string name() const override { return name_; }

  // This split's bytes, and their unigram entropy.
  std::span<const uint8_t> bytes() const { return {bytes_.data() + begin_, end_ - begin_}; }
  double unigram_entropy() const { return dpt::unigram_entropy(bytes()); }
  size_t seq_len() const { return seq_len_; }
  size_t stride() const { return stride_; }
  size_t vocab_size() const { return kVocabSize; }

 private:
  void init(Split split, double val_fraction);

  std::string name_;
  std::vector<uint8_t> bytes_;  // whole corpus; the split is [begin_, end_)
  size_t begin_ = 0, end_ = 0;
  size_t seq_len_, stride_;
  size_t num_windows_ = 0;
};

}  // namespace dpt
