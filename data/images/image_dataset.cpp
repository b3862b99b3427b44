#include "data/images/image_dataset.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dpt {

ImageDataset::ImageDataset(int64_t channels, int64_t h, int64_t w, std::vector<float> mean,
                           std::vector<float> std_dev, const ImageOptions& options)
    : c_(channels), h_(h), w_(w), s_(std::max(h, options.pad_to)), options_(options),
      table_(normalize_table(mean, std_dev)) {
  if (static_cast<int64_t>(mean.size()) != channels)
    throw std::invalid_argument("ImageDataset: " + std::to_string(mean.size()) + " normalisation means for " +
                                std::to_string(channels) + " channels");
  if (options.pad_to > 0 && options.pad_to < std::max(h, w))
    throw std::invalid_argument("image size " + std::to_string(options.pad_to) + " is smaller than the images (" +
                                std::to_string(h) + "x" + std::to_string(w) + "); images are padded, never cut");
  if ((options.pad_to > 0 || options.augment != Augment::none) && h != w)
    throw std::invalid_argument("padding and cropping need square images, got " + std::to_string(h) + "x" +
                                std::to_string(w));
  if (options.crop_padding < 0) throw std::invalid_argument("crop padding must be >= 0");
}

void ImageDataset::fill_for_epoch(std::span<const size_t> indices, uint64_t epoch, Batch& out) const {
  check_indices(*this, indices);
  const size_t n = indices.size();
  const auto in_pixels = static_cast<size_t>(c_ * h_ * w_), out_pixels = static_cast<size_t>(c_ * s_ * s_);
  out.n = n;
  out.sample_shape = {c_, s_, s_};
  out.x.resize(n * out_pixels);
  out.labels.resize(n);
  out.tokens.clear();
  out.targets.clear();
  const bool augment = options_.augment == Augment::crop_flip;
  for (size_t b = 0; b < n; ++b) {
    const size_t i = indices[b];
    CropFlip crop;
    if (augment) crop = crop_flip_for(options_.seed, epoch, i, options_.crop_padding);
    transform_image(pixels_.data() + i * in_pixels, c_, h_, w_, s_, augment ? &crop : nullptr,
                    options_.crop_padding, table_.data(), out.x.data() + b * out_pixels);
    out.labels[b] = labels_[i];
  }
}

}  // namespace dpt
