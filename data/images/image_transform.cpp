#include "data/images/image_transform.h"

#include <stdexcept>
#include <string>

#include "data/rng.h"

namespace dpt {

Augment parse_augment(std::string_view s) {
  if (s == "none") return Augment::none;
  if (s == "crop-flip") return Augment::crop_flip;
  throw std::invalid_argument("unknown augmentation '" + std::string(s) + "' (valid: none, crop-flip)");
}

const char* augment_name(Augment a) { return a == Augment::crop_flip ? "crop-flip" : "none"; }

CropFlip crop_flip_for(uint64_t seed, uint64_t epoch, uint64_t index, int64_t padding) {
  const uint64_t h = mix_seed(mix_seed(mix_seed(seed, epoch), index), 0);
  const auto span = static_cast<uint64_t>(2 * padding + 1);
  CropFlip c;
  c.dy = static_cast<int64_t>(h % span);
  c.dx = static_cast<int64_t>((h / span) % span);
  c.flip = (h >> 63) != 0;
  return c;
}

std::vector<float> normalize_table(const std::vector<float>& mean, const std::vector<float>& std_dev) {
  if (mean.size() != std_dev.size()) throw std::invalid_argument("normalize_table: mean and std differ in length");
  std::vector<float> t(mean.size() * 256);
  for (size_t c = 0; c < mean.size(); ++c)
    for (int p = 0; p < 256; ++p) t[c * 256 + size_t(p)] = (float(p) / 255.0f - mean[c]) / std_dev[c];
  return t;
}

void transform_image(const uint8_t* raw, int64_t channels, int64_t h, int64_t w, int64_t s, const CropFlip* crop,
                     int64_t padding, const float* table, float* out) {
  // Output (oy, ox) reads raw row oy + dy - p - top and column x(ox) + dx - p - left,
  // x(ox) = S-1-ox when flipped; anything outside the raw image is a zero byte.
  const int64_t top = (s - h) / 2, left = (s - w) / 2;
  const int64_t dy = crop ? crop->dy - padding : 0, dx = crop ? crop->dx - padding : 0;
  const bool flip = crop && crop->flip;
  for (int64_t c = 0; c < channels; ++c) {
    const float* lut = table + c * 256;
    const uint8_t* plane = raw + c * h * w;
    float* dst = out + c * s * s;
    for (int64_t oy = 0; oy < s; ++oy) {
      const int64_t ry = oy + dy - top;
      float* row = dst + oy * s;
      if (ry < 0 || ry >= h) {
        for (int64_t ox = 0; ox < s; ++ox) row[ox] = lut[0];
        continue;
      }
      const uint8_t* src = plane + ry * w;
      for (int64_t ox = 0; ox < s; ++ox) {
        const int64_t rx = (flip ? s - 1 - ox : ox) + dx - left;
        row[ox] = (rx >= 0 && rx < w) ? lut[src[rx]] : lut[0];
      }
    }
  }
}

}  // namespace dpt
