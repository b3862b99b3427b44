// The data flags shared by train and train_local: --dataset, --data-dir (the folder or
// file), --seed (data order), and the image and document flags (image_flags.h,
// doc_flags.h).
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "data/images/image_transform.h"
#include "data/make_dataset.h"
#include "models/zoo/models.h"
#include "api/cli/cli.h"
#include "api/cli/doc_flags.h"
#include "api/cli/image_flags.h"
#include "train/trainer_common.h"

namespace dpt::tools {

struct DataFlags {
  ImageFlags image;
  DocFlags docs;
};

// "fashion-mnist | cifar10 | ... (default per model: mlp fashion-mnist, ...)", from the
// datasets make_dataset knows and each model's default_dataset.
inline std::string dataset_help() {
  std::string names, defaults;
  for (const std::string& n : dpt::dataset_names()) names += (names.empty() ? "" : " | ") + n;
  for (const std::string& m : dpt::model_names()) defaults += (defaults.empty() ? "" : ", ") + m + " " + dpt::default_dataset(m);
  return names + " (default per model: " + defaults + ")";
}

inline void add_data_options(boost::program_options::options_description& d, std::string& dataset, std::string& data_dir,
                             uint64_t& seed, DataFlags& f) {
  namespace po = boost::program_options;
  po::options_description g("data");
  g.add_options()
    ("dataset", po::value(&dataset), dataset_help().c_str())
    ("data-dir", po::value(&data_dir), "dataset folder or file (default: the dataset's own)")
    ("seed", po::value(&seed)->default_value(seed), "data order seed (and augmentation)");
  add_image_options(g, f.image);
  add_doc_options(g, f.docs);
  d.add(g);
}

// A --dataset that make_dataset does not know is refused before any work.
inline void check_dataset(const std::string& dataset) {
  if (dataset.empty()) return;
  std::string valid;
  for (const std::string& n : dpt::dataset_names()) {
    if (n == dataset) return;
    valid += (valid.empty() ? "" : ", ") + n;
  }
  throw std::invalid_argument("--dataset '" + dataset + "': unknown (valid: " + valid + ")");
}

// train_local's old name, kept as a hidden alias.
inline void add_data_aliases(Cli& cli) { cli.alias("data", "data-dir"); }

// Call after notify: the image options and the documents file.
inline void apply_data_options(const DataFlags& f, uint64_t seed, ImageOptions& image, std::string& data_dir,
                               std::string& jsonl_field, std::string& tokenizer_dir) {
  image = image_options(f.image, seed);
  apply_doc_flags(f.docs, data_dir, jsonl_field, "--data-dir");
  check_tokenizer_dir(f.docs.tokenizer_dir);
  tokenizer_dir = f.docs.tokenizer_dir;
}

}  // namespace dpt::tools
