#include "data/make_dataset.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "data/images/cifar10.h"
#include "data/images/fashion_mnist.h"
#include "data/synthetic.h"
#include "data/text/text_corpus.h"
#include "data/text/text_docs.h"

namespace dpt {

namespace {

std::unique_ptr<Dataset> make_synthetic(std::string_view task, Split split,
                                        const DatasetOptions& o) {
  const size_t n = o.num_samples ? o.num_samples : (split == Split::train ? 1024 : 256);
  if (task == "regression") {
    return std::make_unique<SyntheticRegression>(n, o.in_features, o.out_features, o.seed, split);
  }
  if (task == "classification") {
    return std::make_unique<SyntheticClassification>(n, o.num_features, o.num_classes, o.seed,
                                                     split);
  }
  throw std::invalid_argument("unknown synthetic task '" + std::string(task) +
                              "' (valid: regression, classification)");
}

// The datasets by name: make_dataset, its error and the programs' --help all read this one table.
struct Entry {
  const char* name;
  std::unique_ptr<Dataset> (*make)(Split split, const DatasetOptions& o);
};
constexpr Entry kDatasets[] = {
    {"fashion-mnist", [](Split split, const DatasetOptions& o) -> std::unique_ptr<Dataset> {
       return std::make_unique<FashionMnist>(o.path, split, o.image);
     }},
    {"cifar10", [](Split split, const DatasetOptions& o) -> std::unique_ptr<Dataset> {
       return std::make_unique<Cifar10>(o.path, split, o.image);
     }},
    {"text", [](Split split, const DatasetOptions& o) -> std::unique_ptr<Dataset> {
       return std::make_unique<TextCorpus>(o.path, split, o.seq_len, o.val_fraction, o.stride);
     }},
    {"text-docs", [](Split split, const DatasetOptions& o) -> std::unique_ptr<Dataset> {
       TextDocsOptions d;
       d.path = o.path;
       d.format = o.doc_format;
       d.jsonl_field = o.jsonl_field;
       d.tokenizer_dir = o.tokenizer_dir;
       d.seq_len = o.seq_len;
       d.val_fraction = o.val_fraction;
       d.val_path = o.val_path;
       return std::make_unique<TextDocs>(d, split);
     }},
    {"synthetic", [](Split split, const DatasetOptions& o) { return make_synthetic(o.task, split, o); }},
    {"synthetic-regression", [](Split split, const DatasetOptions& o) { return make_synthetic("regression", split, o); }},
    {"synthetic-classification",
     [](Split split, const DatasetOptions& o) { return make_synthetic("classification", split, o); }},
};

}  // namespace

const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Entry& e : kDatasets) v.emplace_back(e.name);
    return v;
  }();
  return names;
}

std::unique_ptr<Dataset> make_dataset(std::string_view name, Split split, const DatasetOptions& o) {
  for (const Entry& e : kDatasets)
    if (name == e.name) return e.make(split, o);
  std::string valid;
  for (const std::string& n : dataset_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown dataset '" + std::string(name) + "' (valid: " + valid + ")");
}

std::unique_ptr<Dataset> make_dataset(std::string_view name, std::string_view split,
                                      const DatasetOptions& o) {
  return make_dataset(name, parse_split(split), o);
}

}  // namespace dpt
