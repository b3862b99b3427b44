// CIFAR-10 binary format: files generated here in that format are read back exactly, and
// malformed ones are reported with the file's name.
#include <catch2/catch.hpp>
#include <functional>

#include "data/images/cifar10.h"
#include "data/data_error.h"
#include "data_test_files.h"

using dpt::Cifar10;
using dpt::DataError;
using dpt::Split;
using dpt::testing::TempDir;

namespace {

constexpr size_t kPixels = 3072;

// Pixel k of global record r: a pattern that differs per record, channel and position.
uint8_t pixel(size_t r, size_t k) { return uint8_t((r * 31 + k * 7 + k / 1024) % 256); }

// Writes the standard files with `per_file` records each; record r has label r % 10.
void write_split_files(const TempDir& dir, Split split, size_t per_file, size_t& global) {
  for (const auto& name : Cifar10::file_names(split)) {
    std::vector<uint8_t> labels, pixels;
    for (size_t i = 0; i < per_file; ++i, ++global) {
      labels.push_back(uint8_t(global % 10));
      for (size_t k = 0; k < kPixels; ++k) pixels.push_back(pixel(global, k));
    }
    dpt::write_cifar10_file(dir.file(name), labels, pixels);
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError thrown)";
}

}  // namespace

TEST_CASE("cifar10: generated files round-trip through fill", "[cifar10]") {
  TempDir dir("cifar_ok");
  size_t global = 0;
  write_split_files(dir, Split::train, 3, global);  // records 0..14
  write_split_files(dir, Split::test, 2, global);   // records 15..16

  const Cifar10 train(dir.str(), Split::train);
  const Cifar10 test(dir.str(), Split::test);
  REQUIRE(train.size() == 15);
  REQUIRE(test.size() == 2);
  CHECK(train.name() == "cifar10/train");

  const std::vector<size_t> idx = {14, 0, 7};
  dpt::Batch b;
  train.fill(idx, b);
  REQUIRE(b.n == 3);
  REQUIRE(b.sample_shape == std::vector<int64_t>{3, 32, 32});
  REQUIRE(b.x.size() == 3 * kPixels);
  for (size_t s = 0; s < idx.size(); ++s) {
    CHECK(b.labels[s] == int32_t(idx[s] % 10));
    for (size_t k = 0; k < kPixels; k += 101) {
      const size_t c = k / 1024;
      const double expect = (pixel(idx[s], k) / 255.0 - Cifar10::kMean[c]) / Cifar10::kStd[c];
      CHECK(b.x[s * kPixels + k] == Approx(expect).epsilon(1e-5));
    }
  }
  test.fill(std::vector<size_t>{1}, b);
  CHECK(b.labels[0] == 16 % 10);
  CHECK(b.x[0] ==
        Approx((pixel(16, 0) / 255.0 - Cifar10::kMean[0]) / Cifar10::kStd[0]).epsilon(1e-5));
}

TEST_CASE("cifar10: malformed files are reported by name", "[cifar10]") {
  TempDir dir("cifar_bad");
  size_t global = 0;
  write_split_files(dir, Split::train, 2, global);
  const std::string f3 = dir.file("data_batch_3.bin");

  SECTION("missing file") {
    std::filesystem::remove(f3);
    const auto msg = error_of([&] { Cifar10(dir.str(), Split::train); });
    CHECK(msg.find(f3) != std::string::npos);
    CHECK(msg.find("file not found") != std::string::npos);
  }
  SECTION("truncated record") {
    auto bytes = dpt::testing::read_bytes(f3);
    bytes.resize(bytes.size() - 5);
    dpt::testing::write_bytes(f3, bytes);
    const auto msg = error_of([&] { Cifar10(dir.str(), Split::train); });
    CHECK(msg.find(f3) != std::string::npos);
    CHECK(msg.find("not a positive multiple of the 3073-byte") != std::string::npos);
  }
  SECTION("label out of range") {
    auto bytes = dpt::testing::read_bytes(f3);
    bytes[Cifar10::kRecordBytes] = 10;  // label of the second record
    dpt::testing::write_bytes(f3, bytes);
    const auto msg = error_of([&] { Cifar10(dir.str(), Split::train); });
    CHECK(msg.find(f3) != std::string::npos);
    CHECK(msg.find("record 1 has label 10") != std::string::npos);
  }
  SECTION("explicit file list") {
    const Cifar10 ds(std::vector<std::string>{f3, dir.file("data_batch_1.bin")}, "subset");
    REQUIRE(ds.size() == 4);
    dpt::Batch b;
    ds.fill(std::vector<size_t>{0, 2}, b);
    CHECK(b.labels == std::vector<int32_t>{4, 0});  // record 4 opens file 3, record 0 file 1
  }
}
