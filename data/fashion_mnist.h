#pragma once
// Fashion-MNIST (Zalando): 28x28 grayscale images of clothing in 10 classes, 60000 train
// and 10000 test, stored as four gzip-compressed IDX files. Pixels are scaled to [0, 1]
// and then normalized with the training set's mean and standard deviation, the values
// every PyTorch tutorial uses.
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace dpt {

// Debian's dataset-fashion-mnist package installs the files here.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

class FashionMnist : public Dataset {
 public:
  static constexpr float kMean = 0.2860f;
  static constexpr float kStd = 0.3530f;
  static constexpr int kRows = 28, kCols = 28, kClasses = 10;

  // Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. Throws DataError naming
  // the file on anything missing or malformed. An empty `dir` means the default.
  FashionMnist(const std::string& dir, Split split);

  size_t size() const override { return labels_.size(); }
  // x: [n, 1, 28, 28] normalized pixels, labels: [n].
  void fill(std::span<const size_t> indices, Batch& out) const override;
  std::string name() const override;

  const std::vector<uint8_t>& raw_labels() const { return labels_; }
  const std::vector<uint8_t>& raw_pixels() const { return pixels_; }

 private:
  Split split_;
  std::vector<uint8_t> pixels_;  // [n, 28, 28], 0..255
  std::vector<uint8_t> labels_;  // [n], 0..9
};

}  // namespace dpt
