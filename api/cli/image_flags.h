// The image-data flags shared by train_local and train: --image-size (zero-pad to N x N)
// and --augment (the tutorial's RandomCrop + RandomHorizontalFlip, training split only).
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/images/image_transform.h"

namespace dpt::tools {

struct ImageFlags {
  ImageOptions image;
  std::string augment = "none";
};

inline void add_image_options(boost::program_options::options_description& d, ImageFlags& f) {
  namespace po = boost::program_options;
  d.add_options()
    ("image-size", po::value(&f.image.pad_to)->default_value(0), "images: zero-pad (centred) to N x N, e.g. 32 for Fashion-MNIST (0: as stored)")
    ("augment", po::value(&f.augment)->default_value("none"), "images, training split: none or crop-flip (RandomCrop(size, padding=4) + RandomHorizontalFlip, from seed, epoch and sample index)");
}

// Call after notify: the parsed options, the augmentation seeded by the data seed.
inline ImageOptions image_options(const ImageFlags& f, uint64_t seed) {
  ImageOptions o = f.image;
  try {
    o.augment = parse_augment(f.augment);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--augment: ") + e.what());
  }
  if (o.pad_to < 0) throw std::invalid_argument("--image-size must be >= 0, got " + std::to_string(o.pad_to));
  o.seed = seed;
  return o;
}

// "1x32x32" (a sample's shape, for the tools' configuration tables).
inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

}  // namespace dpt::tools
