// Fashion-MNIST: the real files from Debian's dataset-fashion-mnist, and small generated
// IDX files that are broken in each way the loader must report.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <numeric>

#include "data/data_error.h"
#include "data/files/gzip_file.h"
#include "data/images/fashion_mnist.h"
#include "data/images/idx_file.h"
#include "data_test_files.h"

using dpt::DataError;
using dpt::FashionMnist;
using dpt::Split;
using dpt::testing::TempDir;

namespace {

// Expects a DataError whose message contains every one of `parts`.
void require_data_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const DataError& e) {
    const std::string msg = e.what();
    INFO("message: " << msg);
    for (const auto& p : parts) CHECK(msg.find(p) != std::string::npos);
    return;
  }
  FAIL("expected a DataError containing '" << parts.front() << "'");
}

// A small valid Fashion-MNIST-shaped split: n images with pixel (i, k) = (i * 7 + k) % 256.
struct SmallSet {
  std::vector<uint8_t> images, labels;
  explicit SmallSet(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < 784; ++k) images.push_back(uint8_t((i * 7 + k) % 256));
      labels.push_back(uint8_t(i % 10));
    }
  }
  void write(const TempDir& dir, const std::string& prefix) const {
    const uint32_t n = uint32_t(labels.size());
    dpt::testing::write_gzip(dir.file(prefix + "-images-idx3-ubyte.gz"),
                             dpt::testing::idx_bytes({n, 28, 28}, images));
    dpt::testing::write_gzip(dir.file(prefix + "-labels-idx1-ubyte.gz"),
                             dpt::testing::idx_bytes({n}, labels));
  }
};

}  // namespace

TEST_CASE("fashion-mnist: real IDX files parse with the published counts", "[fashion_mnist]") {
  const FashionMnist train("", Split::train);
  const FashionMnist test(dpt::kFashionMnistDefaultDir, Split::test);
  REQUIRE(train.size() == 60000);
  REQUIRE(test.size() == 10000);
  CHECK(train.name() == "fashion-mnist/train");

  // Fashion-MNIST is balanced: 6000 per class in train, 1000 in test.
  std::array<size_t, 10> train_counts{}, test_counts{};
  for (uint8_t l : train.raw_labels()) ++train_counts.at(l);
  for (uint8_t l : test.raw_labels()) ++test_counts.at(l);
  for (int c = 0; c < 10; ++c) {
    CHECK(train_counts[c] == 6000);
    CHECK(test_counts[c] == 1000);
  }

  // The normalization constants are the training set's own mean and std.
  double sum = 0, sum_sq = 0;
  for (uint8_t p : train.raw_pixels()) {
    const double v = p / 255.0;
    sum += v;
    sum_sq += v * v;
  }
  const double n = double(train.raw_pixels().size());
  const double mean = sum / n, std_dev = std::sqrt(sum_sq / n - mean * mean);
  CHECK(mean == Approx(FashionMnist::kMean).margin(5e-4));
  CHECK(std_dev == Approx(FashionMnist::kStd).margin(5e-4));
}

TEST_CASE("fashion-mnist: fill gives normalized images and labels", "[fashion_mnist]") {
  const FashionMnist test("", Split::test);
  const std::vector<size_t> idx = {9999, 0, 17};
  dpt::Batch b;
  b.targets = {1.0f};  // stale content must be cleared
  test.fill(idx, b);
  REQUIRE(b.n == 3);
  REQUIRE(b.sample_shape == std::vector<int64_t>{1, 28, 28});
  REQUIRE(b.x.size() == 3 * 784);
  REQUIRE(b.labels.size() == 3);
  CHECK(b.targets.empty());
  CHECK(b.tokens.empty());
  for (size_t s = 0; s < idx.size(); ++s) {
    CHECK(b.labels[s] == test.raw_labels()[idx[s]]);
    for (size_t k = 0; k < 784; k += 37) {
      const float expect = (test.raw_pixels()[idx[s] * 784 + k] / 255.0f - 0.2860f) / 0.3530f;
      CHECK(b.x[s * 784 + k] == Approx(expect).epsilon(1e-6));
    }
  }
  const std::vector<size_t> bad = {10000};
  CHECK_THROWS_AS(test.fill(bad, b), std::out_of_range);
}

TEST_CASE("fashion-mnist: a generated small set round-trips", "[fashion_mnist]") {
  TempDir dir("fmnist_ok");
  SmallSet set(5);
  set.write(dir, "t10k");
  const FashionMnist ds(dir.str(), Split::test);
  REQUIRE(ds.size() == 5);
  CHECK(ds.raw_pixels() == set.images);
  CHECK(ds.raw_labels() == set.labels);
}

TEST_CASE("fashion-mnist: missing files are named", "[fashion_mnist]") {
  TempDir dir("fmnist_missing");
  require_data_error([&] { FashionMnist(dir.str(), Split::train); },
                     {dir.file("train-images-idx3-ubyte.gz"), "file not found"});
  SmallSet(3).write(dir, "t10k");
  std::filesystem::remove(dir.file("t10k-labels-idx1-ubyte.gz"));
  require_data_error([&] { FashionMnist(dir.str(), Split::test); },
                     {"t10k-labels-idx1-ubyte.gz", "file not found"});
}

TEST_CASE("fashion-mnist: the real label file truncated gives a clear error", "[fashion_mnist]") {
  TempDir dir("fmnist_trunc_real");
  const std::string src = std::string(dpt::kFashionMnistDefaultDir) + "/t10k-labels-idx1-ubyte.gz";
  const std::string dst = dir.file("labels.gz");
  auto bytes = dpt::testing::read_bytes(src);
  REQUIRE(bytes.size() > 1000);
  bytes.resize(bytes.size() / 2);
  dpt::testing::write_bytes(dst, bytes);
  require_data_error([&] { dpt::read_idx_file(dst); }, {dst, "truncated"});
}

TEST_CASE("fashion-mnist: corrupted files give clear errors", "[fashion_mnist]") {
  TempDir dir("fmnist_bad");
  SmallSet set(4);
  const std::string images = dir.file("t10k-images-idx3-ubyte.gz");
  const std::string labels = dir.file("t10k-labels-idx1-ubyte.gz");
  auto load = [&] { FashionMnist(dir.str(), Split::test); };

  SECTION("bad magic number") {
    set.write(dir, "t10k");
    dpt::testing::write_gzip(images, dpt::testing::idx_bytes({4, 28, 28}, set.images, 0x12345678));
    require_data_error(load, {images, "bad IDX magic number 0x12345678"});
  }
  SECTION("labels file where images belong (magic 0x00000801)") {
    set.write(dir, "t10k");
    dpt::testing::write_gzip(images, dpt::testing::idx_bytes({4}, set.labels));
    require_data_error(load, {images, "expected images of shape [n, 28, 28]", "[4]"});
  }
  SECTION("wrong image size") {
    set.write(dir, "t10k");
    dpt::testing::write_gzip(
        images, dpt::testing::idx_bytes({4, 28, 27}, std::vector<uint8_t>(4 * 28 * 27)));
    require_data_error(load, {images, "[4, 28, 27]"});
  }
  SECTION("payload shorter than the header promises") {
    set.write(dir, "t10k");
    auto short_images = set.images;
    short_images.resize(short_images.size() - 100);
    dpt::testing::write_gzip(images, dpt::testing::idx_bytes({4, 28, 28}, short_images));
    require_data_error(load, {images, "size mismatch", "truncated"});
  }
  SECTION("trailing bytes after the payload") {
    set.write(dir, "t10k");
    auto long_labels = set.labels;
    long_labels.push_back(1);
    dpt::testing::write_gzip(labels, dpt::testing::idx_bytes({4}, long_labels));
    require_data_error(load, {labels, "size mismatch"});
  }
  SECTION("truncated gzip stream") {
    set.write(dir, "t10k");
    auto gz = dpt::testing::read_bytes(images);
    gz.resize(gz.size() - 12);  // the 8-byte trailer and the end of the deflate data
    dpt::testing::write_bytes(images, gz);
    require_data_error(load, {images, "truncated gzip data"});
  }
  SECTION("flipped bytes inside the gzip stream") {
    set.write(dir, "t10k");
    auto gz = dpt::testing::read_bytes(images);
    REQUIRE(gz.size() > 40);
    for (size_t i = 20; i < 30; ++i) gz[i] ^= 0x5a;
    dpt::testing::write_bytes(images, gz);
    require_data_error(load, {images, "corrupt"});
  }
  SECTION("label out of range") {
    set.write(dir, "t10k");
    auto bad = set.labels;
    bad[2] = 12;
    dpt::testing::write_gzip(labels, dpt::testing::idx_bytes({4}, bad));
    require_data_error(load, {labels, "label 12 at index 2 is not in 0..9"});
  }
  SECTION("label and image counts disagree") {
    set.write(dir, "t10k");
    dpt::testing::write_gzip(labels, dpt::testing::idx_bytes({3}, {1, 2, 3}));
    require_data_error(load, {labels, "3 labels", "4 images"});
  }
  SECTION("empty file") {
    set.write(dir, "t10k");
    dpt::testing::write_bytes(labels, {});
    require_data_error(load, {labels, "too short"});
  }
}

TEST_CASE("idx: dimensions whose product overflows or outgrows the file are refused by name", "[fashion_mnist]") {
  TempDir dir("idx_hostile");
  const std::string path = dir.file("hostile-idx4-ubyte.gz");
  SECTION("65536^4 = 2^64 elements, which wraps to 0: the header-only file's payload") {
    dpt::testing::write_gzip(path, dpt::testing::idx_bytes({65536, 65536, 65536, 65536}, {}));
    require_data_error([&] { dpt::read_idx_file(path); }, {path, "[65536, 65536, 65536, 65536]", "past 2^64"});
  }
  SECTION("(2^32 - 1)^2 * 2 elements: past 2^64 without wrapping to anything small") {
    dpt::testing::write_gzip(path, dpt::testing::idx_bytes({4294967295u, 4294967295u, 2}, {1, 2, 3}));
    require_data_error([&] { dpt::read_idx_file(path); }, {path, "past 2^64"});
  }
  SECTION("10^12 elements promised, 10 bytes present") {
    dpt::testing::write_gzip(path, dpt::testing::idx_bytes({1000000, 1000000}, std::vector<uint8_t>(10)));
    require_data_error([&] { dpt::read_idx_file(path); }, {path, "1000000000000 elements", "truncated"});
  }
}

TEST_CASE("gzip: a bomb is refused at the cap, nothing inflated past it", "[fashion_mnist]") {
  TempDir dir("gzip_bomb");
  const std::string path = dir.file("bomb.gz");
  // 64 MiB of zeros, deflated in a streaming loop at level 9: about 64 KiB on disk.
  constexpr size_t kChunk = size_t(1) << 20, kChunks = 64;
  {
    gzFile f = gzopen(path.c_str(), "wb9");
    REQUIRE(f);
    const std::vector<uint8_t> zeros(kChunk);
    for (size_t i = 0; i < kChunks; ++i) REQUIRE(gzwrite(f, zeros.data(), unsigned(kChunk)) == int(kChunk));
    REQUIRE(gzclose(f) == Z_OK);
  }
  REQUIRE(std::filesystem::file_size(path) < kChunks * kChunk / 100);
  // A cap of 1 MiB stands for the default 1 GiB (a test must not allocate that).
  require_data_error([&] { dpt::read_gzip_file(path, kChunk); }, {path, "more than 1048576 bytes", "gzip bomb"});
  // A file exactly at the cap is read whole.
  CHECK(dpt::read_gzip_file(path, kChunks * kChunk).size() == kChunks * kChunk);
  CHECK(dpt::kMaxGzipBytes == size_t(1) << 30);
}
