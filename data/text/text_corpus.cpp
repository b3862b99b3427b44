#include "data/text/text_corpus.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "data/data_error.h"
#include "data/files/read_file.h"

namespace dpt {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> text_corpus_files(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw_data_error(path, "text corpus not found");
  if (!fs::is_directory(st)) return {path};
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string fname = entry.path().filename().string();
    // .u8 files are symlinks to the text files and .dat files are fortune's binary
    // offset tables: either would duplicate or pollute the text.
    if (entry.is_symlink() || !entry.is_regular_file() || fname.empty() || fname[0] == '.' ||
        ends_with(fname, ".dat") || ends_with(fname, ".u8")) {
      continue;
    }
    files.push_back(entry.path().string());
  }
  if (ec) throw_data_error(path, "cannot list directory: " + ec.message());
  std::sort(files.begin(), files.end());  // directory order is arbitrary; names are not
  return files;
}

std::vector<uint8_t> read_text_corpus(const std::string& path) {
  std::vector<uint8_t> out;
  for (const auto& f : text_corpus_files(path)) append_file(f, out);
  if (out.empty()) throw_data_error(path, "text corpus is empty");
  return out;
}

double unigram_entropy(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return 0.0;
  std::array<uint64_t, 256> counts{};
  for (uint8_t b : bytes) ++counts[b];
  const double n = double(bytes.size());
  double h = 0.0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    const double p = double(c) / n;
    h -= p * std::log(p);
  }
  return h;
}

TextCorpus::TextCorpus(const std::string& path, Split split, size_t seq_len, double val_fraction,
                       size_t stride)
    : name_(std::string("text/") + split_name(split)),
      bytes_(read_text_corpus(path.empty() ? kFortunesDir : path)),
      seq_len_(seq_len),
      stride_(stride == 0 ? seq_len : stride) {
  init(split, val_fraction);
}

TextCorpus::TextCorpus(std::vector<uint8_t> corpus, Split split, size_t seq_len,
                       double val_fraction, size_t stride, std::string name)
    : name_(std::move(name) + "/" + split_name(split)),
      bytes_(std::move(corpus)),
      seq_len_(seq_len),
      stride_(stride == 0 ? seq_len : stride) {
  init(split, val_fraction);
}

void TextCorpus::init(Split split, double val_fraction) {
  if (seq_len_ == 0) throw std::invalid_argument(name_ + ": seq_len must be positive");
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    throw std::invalid_argument(name_ + ": val_fraction must be in [0, 1), got " +
                                std::to_string(val_fraction));
  }
  const size_t n = bytes_.size();
  // Rounded to nearest: n * 0.1 can come out as k - 1e-12 for an exact multiple of ten.
  const size_t cut = n - std::min(n, size_t(std::llround(double(n) * val_fraction)));
  begin_ = split == Split::train ? 0 : cut;
  end_ = split == Split::train ? cut : n;
  const size_t len = end_ - begin_;
  if (len < seq_len_ + 1) {
    throw std::invalid_argument(
        name_ + ": split has " + std::to_string(len) +
        " bytes, fewer than one window of seq_len + 1 = " + std::to_string(seq_len_ + 1));
  }
  num_windows_ = (len - (seq_len_ + 1)) / stride_ + 1;
}

void TextCorpus::fill(std::span<const size_t> indices, Batch& out) const {
  check_indices(*this, indices);
  const size_t n = indices.size();
  out.n = n;
  out.sample_shape = {int64_t(seq_len_)};
  out.tokens.resize(n * seq_len_);
  out.labels.resize(n * seq_len_);
  out.x.clear();
  out.targets.clear();
  for (size_t b = 0; b < n; ++b) {
    const uint8_t* w = bytes_.data() + begin_ + indices[b] * stride_;
    int32_t* tok = out.tokens.data() + b * seq_len_;
    int32_t* lab = out.labels.data() + b * seq_len_;
    for (size_t t = 0; t < seq_len_; ++t) {
      tok[t] = w[t];
      lab[t] = w[t + 1];
    }
  }
}

}  // namespace dpt
