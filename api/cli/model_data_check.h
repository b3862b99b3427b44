// The refusals of a model, dataset and data path that cannot train together, shared by
// train and train_local and made before any rendezvous or loading: otherwise they end in
// the loader or the first step with a message that names no flag (a token id outside the
// embedding, "<dir>/train-images-idx3-ubyte.gz: file not found").
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/images/cifar10.h"
#include "data/dataset.h"
#include "data/images/fashion_mnist.h"
#include "data/text/text_corpus.h"
#include "models/zoo/gpt2.h"
#include "train/trainer_common.h"

namespace dpt::tools {

namespace model_data_detail {

inline std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Both splits' files of an image dataset, relative to its directory; empty for the others.
inline std::vector<std::string> image_files(const std::string& dataset) {
  std::vector<std::string> out;
  for (Split s : {Split::train, Split::test}) {
    const std::vector<std::string> names = dataset == "cifar10"         ? Cifar10::file_names(s)
                                           : dataset == "fashion-mnist" ? FashionMnist::file_names(s)
                                                                        : std::vector<std::string>{};
    out.insert(out.end(), names.begin(), names.end());
  }
  return out;
}

// Where an image dataset comes from and the flag that points at a copy.
inline std::string image_source(const std::string& dataset) {
  if (dataset == "cifar10")
    return ", the binary version's folder cifar-10-batches-bin (unpacked from cifar-10-binary.tar.gz, "
           "https://www.cs.toronto.edu/~kriz/cifar.html). This project cannot download CIFAR-10 (no Debian package "
           "has it; tools/install_deps.sh leaves it out): fetch and unpack it where you can, then point --data-dir "
           "at that folder";
  return std::string("; Debian's dataset-fashion-mnist package installs them in ") + kFashionMnistDefaultDir +
         " (bash tools/install_deps.sh), or point --data-dir at a folder that holds them";
}

}  // namespace model_data_detail

// model and vocab: the model and its embedding rows (ModelConfig::vocab); dataset: the
// --dataset given, empty for the model's default; data_path: the data path after
// --data-file went into it; data_file: --data-file's value. Throws std::invalid_argument
// naming the flags involved and the one to use instead.
inline void check_model_data(const std::string& model, int64_t vocab, const std::string& dataset,
                             const std::string& data_path, const std::string& data_file) {
  using namespace model_data_detail;
  const std::string ds = dataset.empty() ? default_dataset(model) : dataset;
  const std::string named = "--dataset " + ds + (dataset.empty() ? " (--model " + model + "'s default)" : "");
  const std::vector<std::string> images = image_files(ds);
  if (!data_file.empty() && ds != "text" && ds != "text-docs") {
    const std::string reads = images.empty() ? "generated data, which reads no file"
                                             : "images read from a directory: --data-dir DIR holding " + join(images);
    throw std::invalid_argument("--data-file '" + data_file + "' is the text of --dataset text (raw bytes, for --model gpt) "
                                "or --dataset text-docs (documents through GPT-2's tokenizer, for --model gpt2), but " +
                                named + " is " + reads + ". To train on that text: --model gpt2 --data-file FILE, or "
                                "--model gpt --dataset text --data-file FILE");
  }
  if (model == "gpt" || model == "gpt2") {
    const int64_t needed = ds == "text-docs" ? kGpt2Vocab : ds == "text" ? TextCorpus::kVocabSize : 0;
    if (vocab < needed)
      throw std::invalid_argument(
          "--model " + model + " has a vocabulary of " + std::to_string(vocab) + (model == "gpt" ? " (bytes)" : " (--vocab)") +
          " but " + named + " gives " +
          (ds == "text-docs" ? "GPT-2 BPE token ids (a vocabulary of " + std::to_string(kGpt2Vocab) + ")"
                             : "bytes (a vocabulary of " + std::to_string(TextCorpus::kVocabSize) + ")") +
          ": " +
          (model == "gpt" ? "use --model gpt2 for text-docs, or --dataset text to train gpt on the bytes"
                          : "leave --vocab out (" + std::to_string(kGpt2Vocab) + ") or use --dataset text"));
  }
  if (images.empty()) return;
  const std::string dir = data_path.empty() ? (ds == "cifar10" ? kCifar10DefaultDir : kFashionMnistDefaultDir) : data_path;
  std::vector<std::string> missing;
  std::error_code ec;
  for (const std::string& f : images)
    if (!std::filesystem::is_regular_file(std::filesystem::path(dir) / f, ec)) missing.push_back(f);
  if (missing.empty()) return;
  const std::string where = std::filesystem::absolute(dir, ec).lexically_normal().string();
  const std::string what = std::filesystem::is_regular_file(dir, ec) ? " is a file, not a directory"
                           : missing.size() == images.size()         ? " has none of its files"
                                                                     : " lacks " + join(missing);
  throw std::invalid_argument(named + ": '" + dir + "'" + (where != dir ? " (" + where + ")" : "") + what +
                              (data_path.empty() ? " (the default directory; --data-dir names another)" : "") +
                              ". It reads " + join(images) + image_source(ds));
}

}  // namespace dpt::tools
