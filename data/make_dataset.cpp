#include "data/make_dataset.h"

#include <stdexcept>

#include "data/cifar10.h"
#include "data/fashion_mnist.h"
#include "data/synthetic.h"
#include "data/text_corpus.h"
#include "data/text_docs.h"

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

}  // namespace

std::unique_ptr<Dataset> make_dataset(std::string_view name, Split split, const DatasetOptions& o) {
  if (name == "fashion-mnist") return std::make_unique<FashionMnist>(o.path, split, o.image);
  if (name == "cifar10") return std::make_unique<Cifar10>(o.path, split, o.image);
  if (name == "text") {
    return std::make_unique<TextCorpus>(o.path, split, o.seq_len, o.val_fraction, o.stride);
  }
  if (name == "text-docs") {
    TextDocsOptions d;
    d.path = o.path;
    d.format = o.doc_format;
    d.jsonl_field = o.jsonl_field;
    d.tokenizer_dir = o.tokenizer_dir;
    d.seq_len = o.seq_len;
    d.val_fraction = o.val_fraction;
    return std::make_unique<TextDocs>(d, split);
  }
  if (name == "synthetic") return make_synthetic(o.task, split, o);
  if (name == "synthetic-regression") return make_synthetic("regression", split, o);
  if (name == "synthetic-classification") return make_synthetic("classification", split, o);
  throw std::invalid_argument("unknown dataset '" + std::string(name) +
                              "' (valid: fashion-mnist, cifar10, text, text-docs, synthetic, "
                              "synthetic-regression, synthetic-classification)");
}

std::unique_ptr<Dataset> make_dataset(std::string_view name, std::string_view split,
                                      const DatasetOptions& o) {
  return make_dataset(name, parse_split(split), o);
}

}  // namespace dpt
