#pragma once
// ImageDataset: labelled images held as raw bytes [n, C, H, W] (0..255) and handed out
// through the tutorial's transform chain (image_transform.h): optional zero-padding to
// a larger size, RandomCrop + RandomHorizontalFlip decided by (seed, epoch, index),
// scaling to [0, 1] and per-channel Normalize. Cifar10 and FashionMnist are
// ImageDatasets that only know how to read their files.
#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "data/images/image_transform.h"

namespace dpt {

class ImageDataset : public Dataset {
 public:
  size_t size() const override { return labels_.size(); }
  // x: [n, C, S, S] (S = output_size()), labels: [n]. fill() is epoch 0.
  void fill(std::span<const size_t> indices, Batch& out) const override { fill_for_epoch(indices, 0, out); }
  void fill_for_epoch(std::span<const size_t> indices, uint64_t epoch, Batch& out) const override;

  const ImageOptions& image_options() const { return options_; }
  int64_t channels() const { return c_; }
  int64_t output_size() const { return s_; }
  const std::vector<uint8_t>& raw_labels() const { return labels_; }
  const std::vector<uint8_t>& raw_pixels() const { return pixels_; }

 protected:
  // Throws std::invalid_argument when options.pad_to is below the image size or the
  // image is not square while padding or cropping.
  ImageDataset(int64_t channels, int64_t h, int64_t w, std::vector<float> mean, std::vector<float> std_dev,
               const ImageOptions& options);

  std::vector<uint8_t> pixels_;  // [n, C, H, W], filled by the derived constructor
  std::vector<uint8_t> labels_;  // [n]

 private:
  int64_t c_, h_, w_, s_;
  ImageOptions options_;
  std::vector<float> table_;  // normalize_table(mean, std)
};

}  // namespace dpt
