#pragma once
// The image transform chain of the PyTorch CIFAR-10 tutorial, on bytes:
//   [pad to S]  -> RandomCrop(S, padding=p) -> RandomHorizontalFlip(0.5) -> ToTensor -> Normalize
// Terms:
//   raw image   C x H x W bytes (0..255), as a dataset file holds it.
//   S           the output size: H, or pad_to when larger (Fashion-MNIST's 28 -> 32);
//               the raw image sits centred in S x S zeros ((S - H) / 2 rows above).
//   crop        the tutorial's RandomCrop(S, padding=p): the S x S image is padded by p
//               zeros on every side and an S x S window at offset (dy, dx), each in
//               [0, 2p], is cut out of it; flip then mirrors the window's columns.
//   decision    (dy, dx, flip) for one sample. It is a function of (seed, epoch, sample
//               index) only: h = mix_seed(mix_seed(mix_seed(seed, epoch), index), 0)
//               (data/rng.h), dy = h mod (2p+1), dx = (h / (2p+1)) mod (2p+1),
//               flip = bit 63 of h. So a sample is augmented the same way whatever the
//               world size, the rank that loads it or its place in a batch.
//   normalise   x = (byte / 255 - mean[c]) / std[c]; padding bytes are 0, so they become
//               -mean[c] / std[c], as in torchvision where padding precedes ToTensor.
#include <cstdint>
#include <string_view>
#include <vector>

namespace dpt {

enum class Augment { none, crop_flip };

// "none" | "crop-flip"; throws std::invalid_argument naming the valid values.
Augment parse_augment(std::string_view s);
const char* augment_name(Augment a);

struct ImageOptions {
  Augment augment = Augment::none;
  int64_t pad_to = 0;        // > 0: zero-pad the raw image (centred) to pad_to x pad_to first
  int64_t crop_padding = 4;  // p of RandomCrop(S, padding=p)
  uint64_t seed = 0;         // the augmentation's seed (the data order's seed is separate)
};

struct CropFlip {
  int64_t dy = 0, dx = 0;  // window offset in the p-padded image, each in [0, 2p]
  bool flip = false;
};

CropFlip crop_flip_for(uint64_t seed, uint64_t epoch, uint64_t index, int64_t padding);

// Per-channel lookup tables byte -> normalised float: table[c * 256 + byte].
std::vector<float> normalize_table(const std::vector<float>& mean, const std::vector<float>& std_dev);

// Writes one sample's C x S x S floats. `crop` null: no crop, no flip (p ignored).
void transform_image(const uint8_t* raw, int64_t channels, int64_t h, int64_t w, int64_t s, const CropFlip* crop,
                     int64_t padding, const float* table, float* out);

}  // namespace dpt
