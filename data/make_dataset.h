#pragma once
// Builds a dataset by name, so programs can take it from a flag.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "data/images/image_transform.h"

namespace dpt {

struct DatasetOptions {
  // fashion-mnist, cifar10: the directory; text, text-docs: a file or directory. Empty: the
  // default (kFashionMnistDefaultDir, kCifar10DefaultDir, kFortunesDir).
  std::string path;
  // text, text-docs
  size_t seq_len = 64;        // tokens per sample
  size_t stride = 0;          // spacing of window starts; 0 = seq_len (no overlap)
  double val_fraction = 0.1;  // text: tail held out; text-docs: 1 document in 1/f held out
  std::string val_path;       // text-docs: the held-out documents' file (then val_fraction is unused)
  // text-docs (text_docs.h): `path` is the data file or directory (empty: the fortunes)
  std::string tokenizer_dir;  // empty: tokenizer::default_tokenizer_dir()
  std::string jsonl_field;    // set: one JSON object per line, the document is this field
  std::string doc_format;     // "lines" | "jsonl" | "fortunes" | "" (from the path and field)
  // fashion-mnist, cifar10: padding, augmentation (use Augment::none for held-out data)
  ImageOptions image;
  // synthetic
  std::string task = "regression";              // "regression" | "classification"
  size_t num_samples = 0;                       // 0: 1024 for train, 256 for test
  size_t in_features = 10, out_features = 5;    // regression (ToyModel's shapes)
  size_t num_features = 784, num_classes = 10;  // classification (MLP's shapes)
  uint64_t seed = 0;
};

// Every name make_dataset knows, in the order --help lists them.
const std::vector<std::string>& dataset_names();

// name: "fashion-mnist" | "cifar10" | "text" | "text-docs" | "synthetic" (task from options) |
// "synthetic-regression" | "synthetic-classification" (dataset_names()). Unknown names throw
// std::invalid_argument listing the valid ones; file problems throw DataError.
std::unique_ptr<Dataset> make_dataset(std::string_view name, Split split,
                                      const DatasetOptions& options = {});
std::unique_ptr<Dataset> make_dataset(std::string_view name, std::string_view split,
                                      const DatasetOptions& options = {});

}  // namespace dpt
