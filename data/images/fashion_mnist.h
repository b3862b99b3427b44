#pragma once
// Fashion-MNIST (Zalando): 28x28 grayscale images of clothing in 10 classes, 60000 train
// and 10000 test, stored as four gzip-compressed IDX files. Samples go through
// ImageDataset's transform chain (ImageOptions::pad_to 32 gives 32x32 images for
// ResNet-18 and the 32-pixel RandomCrop); Normalize uses the training set's mean and
// standard deviation (0.2860, 0.3530), the values every PyTorch tutorial uses. One
// channel: models adapt their first layer (ResNet-18's conv1 is [64, 1, k, k]).
#include <cstdint>
#include <string>
#include <vector>

#include "data/images/image_dataset.h"

namespace dpt {

// Debian's dataset-fashion-mnist package installs the files here.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

class FashionMnist : public ImageDataset {
 public:
  static constexpr float kMean = 0.2860f;
  static constexpr float kStd = 0.3530f;
  static constexpr int kRows = 28, kCols = 28, kClasses = 10;

  // Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. Throws DataError naming
  // the file on anything missing or malformed. An empty `dir` means the default.
  FashionMnist(const std::string& dir, Split split, const ImageOptions& options = {});

  // x: [n, 1, S, S] normalized pixels (S = 28 unless padded), labels: [n].
  std::string name() const override;
  size_t num_classes() const override { return kClasses; }

  // The file names of a split, relative to its directory: images, then labels.
  static std::vector<std::string> file_names(Split split);

 private:
  Split split_;
};

}  // namespace dpt
