// The tutorial's augmentation (RandomCrop(32, padding=4) + RandomHorizontalFlip) and the
// image transform chain: each sample's crop and flip depend on (seed, epoch, index)
// alone, so every world size and rank sees the same augmented sample; the pixels match
// a plain reference written out step by step (pad, cut the window, mirror, normalise).
// torch_ref/augment_vs_torchvision.py checks the same against torchvision's transforms.
#include <catch2/catch.hpp>

#include <map>

#include "data/images/cifar10.h"
#include "data/loading/loader.h"
#include "data/loading/sampler.h"
#include "data_test_files.h"

using namespace dpt;
using dpt::testing::TempDir;

namespace {

constexpr size_t kPixels = 3072;

// A small CIFAR-10 folder: `n` training records of varied pixels, 2 test records.
void write_cifar(const TempDir& dir, size_t n) {
  size_t r = 0;
  for (const auto& name : Cifar10::file_names(Split::train)) {
    std::vector<uint8_t> labels, pixels;
    for (size_t i = 0; i < n / 5; ++i, ++r) {
      labels.push_back(uint8_t(r % 10));
      for (size_t k = 0; k < kPixels; ++k) pixels.push_back(uint8_t((r * 131 + k * 17 + (k >> 7)) % 251 + 3));
    }
    write_cifar10_file(dir.file(name), labels, pixels);
  }
  write_cifar10_file(dir.file("test_batch.bin"), {1, 2}, std::vector<uint8_t>(2 * kPixels, 9));
}

// The transform by its definition: an (S+2p)^2 zero canvas holding the S x S image
// (itself the raw image centred in zeros), the S x S window at (dy, dx), mirrored when
// flipped, each byte mapped to (v/255 - mean)/std.
std::vector<float> reference(const uint8_t* raw, int64_t h, int64_t s, int64_t p, const CropFlip& c, bool crop) {
  const int64_t big = s + 2 * p, off = (s - h) / 2 + p;
  std::vector<float> out;
  for (int64_t ch = 0; ch < 3; ++ch) {
    std::vector<uint8_t> canvas(size_t(big * big), 0);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < h; ++x) canvas[size_t((y + off) * big + x + off)] = raw[(ch * h + y) * h + x];
    const int64_t y0 = crop ? c.dy : p, x0 = crop ? c.dx : p;  // the window's corner
    const bool flip = crop && c.flip;
    for (int64_t y = 0; y < s; ++y)
      for (int64_t x = 0; x < s; ++x) {
        const uint8_t v = canvas[size_t((y0 + y) * big + x0 + (flip ? s - 1 - x : x))];
        out.push_back((float(v) / 255.0f - Cifar10::kMean[ch]) / Cifar10::kStd[ch]);
      }
  }
  return out;
}

// Every sample one epoch hands each rank, keyed by dataset index.
std::map<size_t, std::vector<float>> epoch_samples(const Dataset& ds, int world, uint64_t epoch) {
  std::map<size_t, std::vector<float>> got;
  for (int rank = 0; rank < world; ++rank) {
    DistributedSampler sampler(ds.size(), world, rank, true, 42);
    DataLoader loader(ds, sampler, 3, false, 1);
    loader.reset(epoch);
    const std::vector<size_t> idx = sampler.indices();
    Batch b;
    size_t k = 0;
    while (loader.next(b))
      for (size_t i = 0; i < b.n; ++i, ++k) {
        std::vector<float> x(b.x.begin() + long(i * kPixels), b.x.begin() + long((i + 1) * kPixels));
        auto [it, fresh] = got.emplace(idx[k], x);
        if (!fresh) REQUIRE(it->second == x);  // a sample padded in twice is the same sample
      }
  }
  return got;
}

}  // namespace

TEST_CASE("augment: crop and flip depend on (seed, epoch, index) only, not on world size or rank", "[augment]") {
  TempDir dir("augment_world");
  write_cifar(dir, 25);
  ImageOptions opt;
  opt.augment = Augment::crop_flip;
  opt.seed = 7;
  const Cifar10 ds(dir.str(), Split::train, opt);
  const auto one = epoch_samples(ds, 1, 3);
  REQUIRE(one.size() == 25);
  for (int world : {2, 3, 4}) {
    INFO("world size " << world);
    CHECK(epoch_samples(ds, world, 3) == one);
  }
  // Another epoch augments differently (most samples change).
  const auto next = epoch_samples(ds, 2, 4);
  int changed = 0;
  for (const auto& [i, x] : next) changed += x != one.at(i);
  CHECK(changed >= 20);
  // Without augmentation the epoch does not matter.
  const Cifar10 plain(dir.str(), Split::train);
  CHECK(epoch_samples(plain, 2, 3) == epoch_samples(plain, 3, 9));
}

TEST_CASE("augment: the decisions are uniform over the 9 x 9 offsets and flip half the time", "[augment]") {
  std::vector<int> dy(9), dx(9);
  int flips = 0;
  const int n = 90000;
  for (int i = 0; i < n; ++i) {
    const CropFlip c = crop_flip_for(1, 2, uint64_t(i), 4);
    REQUIRE(c.dy >= 0);
    REQUIRE(c.dy <= 8);
    REQUIRE(c.dx >= 0);
    REQUIRE(c.dx <= 8);
    ++dy[size_t(c.dy)];
    ++dx[size_t(c.dx)];
    flips += c.flip;
  }
  for (int v = 0; v < 9; ++v) {
    CHECK(std::abs(dy[size_t(v)] - n / 9) < 400);  // ~4 standard deviations
    CHECK(std::abs(dx[size_t(v)] - n / 9) < 400);
  }
  CHECK(std::abs(flips - n / 2) < 600);
  CHECK(crop_flip_for(1, 2, 5, 4).dy == crop_flip_for(1, 2, 5, 4).dy);
}

TEST_CASE("augment: pixels match the step-by-step definition, with and without padding to a size", "[augment]") {
  TempDir dir("augment_ref");
  write_cifar(dir, 10);
  for (int64_t size : {32, 36}) {
    for (bool crop : {false, true}) {
      DYNAMIC_SECTION("size " << size << (crop ? " crop-flip" : " none")) {
        ImageOptions opt;
        opt.augment = crop ? Augment::crop_flip : Augment::none;
        opt.pad_to = size;
        opt.seed = 11;
        const Cifar10 ds(dir.str(), Split::train, opt);
        Batch b;
        const std::vector<size_t> idx{0, 3, 9, 4, 7, 1, 2, 8, 5, 6};
        ds.fill_for_epoch(idx, 5, b);
        REQUIRE(b.sample_shape == std::vector<int64_t>{3, size, size});
        const size_t per = size_t(3 * size * size);
        int flipped = 0;
        for (size_t k = 0; k < idx.size(); ++k) {
          const CropFlip c = crop_flip_for(11, 5, idx[k], 4);
          flipped += c.flip;
          const auto expect = reference(ds.raw_pixels().data() + idx[k] * kPixels, 32, size, 4, c, crop);
          INFO("sample " << idx[k] << " dy " << c.dy << " dx " << c.dx << " flip " << c.flip);
          CHECK(std::equal(expect.begin(), expect.end(), b.x.begin() + long(k * per)));
        }
        if (crop) CHECK(flipped > 0);
      }
    }
  }
}

TEST_CASE("augment: bad options are refused clearly", "[augment]") {
  CHECK_THROWS_WITH(parse_augment("random"), Catch::Contains("valid: none, crop-flip"));
  TempDir dir("augment_bad");
  write_cifar(dir, 5);
  ImageOptions opt;
  opt.pad_to = 30;
  CHECK_THROWS_WITH(Cifar10(dir.str(), Split::train, opt), Catch::Contains("image size 30 is smaller than the images"));
}
