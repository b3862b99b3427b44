#pragma once
// CIFAR-10, binary version: 32x32 colour images in 10 classes. Each file is a sequence of
// *records* of 3073 bytes: one label byte (0..9), then 1024 red, 1024 green and 1024 blue
// pixel bytes, each plane row-major. The training set is data_batch_1.bin ..
// data_batch_5.bin, the test set test_batch.bin (the folder cifar-10-batches-bin of the
// official cifar-10-binary.tar.gz). Samples go through ImageDataset's transform chain;
// Normalize uses the PyTorch DDP tutorial's constants, mean (0.4914, 0.4822, 0.4465)
// and std (0.2023, 0.1994, 0.2010).
#include <cstdint>
#include <string>
#include <vector>

#include "data/images/image_dataset.h"

namespace dpt {

inline constexpr const char* kCifar10DefaultDir = "cifar-10-batches-bin";

class Cifar10 : public ImageDataset {
 public:
  static constexpr size_t kRecordBytes = 1 + 3 * 32 * 32;
  static constexpr int kClasses = 10;
  static constexpr float kMean[3] = {0.4914f, 0.4822f, 0.4465f};
  static constexpr float kStd[3] = {0.2023f, 0.1994f, 0.2010f};

  // Reads the standard file names of `split` under `dir`; empty means
  // kCifar10DefaultDir, the directory name inside the official tarball.
  Cifar10(const std::string& dir, Split split, const ImageOptions& options = {});
  // Reads exactly these files, in order (tests, subsets).
  explicit Cifar10(const std::vector<std::string>& files, std::string name = "cifar10",
                   const ImageOptions& options = {});

  // x: [n, 3, S, S] normalized pixels (S = 32 unless padded), labels: [n].
  std::string name() const override { return name_; }
  size_t num_classes() const override { return kClasses; }

  // The file names of a split, relative to its directory.
  static std::vector<std::string> file_names(Split split);

 private:
  void load(const std::vector<std::string>& files);

  std::string name_;
};

// Writes records in the CIFAR-10 binary format (used by tests to make small files).
// `pixels` holds labels.size() * 3072 bytes.
void write_cifar10_file(const std::string& path, const std::vector<uint8_t>& labels,
                        const std::vector<uint8_t>& pixels);

}  // namespace dpt
