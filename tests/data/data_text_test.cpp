// Text corpus: the train/validation split, the shifted windows, the directory reader that
// skips fortune's index files, and the unigram entropy.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "data/data_error.h"
#include "data/text/text_corpus.h"
#include "data_test_files.h"

using dpt::Split;
using dpt::TextCorpus;
using dpt::testing::TempDir;

namespace {

std::vector<uint8_t> counting_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i);
  return v;
}

}  // namespace

TEST_CASE("text: last 10% is validation, windows are shifted by one", "[text]") {
  const auto bytes = counting_bytes(100);
  const TextCorpus train(bytes, Split::train, 8);
  const TextCorpus val(bytes, Split::test, 8);
  REQUIRE(train.bytes().size() == 90);
  REQUIRE(val.bytes().size() == 10);
  CHECK(train.bytes().front() == 0);
  CHECK(val.bytes().front() == 90);
  // Non-overlapping windows of 9 bytes starting every 8: (90 - 9) / 8 + 1 = 11.
  REQUIRE(train.size() == 11);
  REQUIRE(val.size() == 1);
  CHECK(train.name() == "text/train");
  CHECK(val.name() == "text/test");

  dpt::Batch b;
  train.fill(std::vector<size_t>{10, 0}, b);
  REQUIRE(b.n == 2);
  REQUIRE(b.sample_shape == std::vector<int64_t>{8});
  REQUIRE(b.tokens.size() == 16);
  REQUIRE(b.labels.size() == 16);
  CHECK(b.x.empty());
  for (int t = 0; t < 8; ++t) {
    CHECK(b.tokens[t] == 80 + t);  // window 10 starts at byte 80
    CHECK(b.labels[t] == 81 + t);  // the last label, byte 88, is still in the train part
    CHECK(b.tokens[8 + t] == t);
    CHECK(b.labels[8 + t] == t + 1);
  }
  val.fill(std::vector<size_t>{0}, b);
  CHECK(b.tokens[0] == 90);
  CHECK(b.labels[7] == 98);
  CHECK_THROWS_AS(train.fill(std::vector<size_t>{11}, b), std::out_of_range);
}

TEST_CASE("text: stride and validation fraction", "[text]") {
  const auto bytes = counting_bytes(200);
  const TextCorpus every(bytes, Split::train, 4, 0.25, 1);
  REQUIRE(every.bytes().size() == 150);
  REQUIRE(every.size() == 150 - 5 + 1);  // every start with 5 bytes after it in the split
  dpt::Batch b;
  every.fill(std::vector<size_t>{145}, b);
  CHECK(b.tokens == std::vector<int32_t>{145, 146, 147, 148});
  CHECK(b.labels == std::vector<int32_t>{146, 147, 148, 149});

  CHECK_THROWS_AS(TextCorpus(bytes, Split::test, 4, 0.0), std::invalid_argument);  // empty val
  CHECK_THROWS_AS(TextCorpus(bytes, Split::train, 4, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(TextCorpus(bytes, Split::train, 0), std::invalid_argument);
}

TEST_CASE("text: unigram entropy in nats per byte", "[text]") {
  const std::vector<uint8_t> four = {'a', 'b', 'c', 'd', 'a', 'b', 'c', 'd'};
  CHECK(dpt::unigram_entropy(four) == Approx(std::log(4.0)));
  const std::vector<uint8_t> one(50, 'x');
  CHECK(dpt::unigram_entropy(one) == 0.0);
  // p = (3/4, 1/4): -(0.75 ln 0.75 + 0.25 ln 0.25) = 0.5623351446...
  const std::vector<uint8_t> skew = {'a', 'a', 'a', 'b'};
  CHECK(dpt::unigram_entropy(skew) == Approx(0.5623351446188083));
  CHECK(dpt::unigram_entropy(counting_bytes(256)) == Approx(std::log(256.0)));
}

TEST_CASE("text: a directory is its text files in name order, index files skipped", "[text]") {
  TempDir dir("text_dir");
  dpt::testing::write_bytes(dir.file("b"), {'B', 'B'});
  dpt::testing::write_bytes(dir.file("a"), {'A'});
  dpt::testing::write_bytes(dir.file("a.dat"), {0, 1, 2});
  dpt::testing::write_bytes(dir.file(".hidden"), {'H'});
  std::filesystem::create_symlink(dir.file("a"), dir.file("a.u8"));
  std::filesystem::create_directory(dir.file("sub"));
  dpt::testing::write_bytes(dir.file("sub/c"), {'C'});
  CHECK(dpt::read_text_corpus(dir.str()) == std::vector<uint8_t>{'A', 'B', 'B'});
  CHECK(dpt::read_text_corpus(dir.file("b")) == std::vector<uint8_t>{'B', 'B'});
  CHECK_THROWS_AS(dpt::read_text_corpus(dir.file("nope")), dpt::DataError);
  TempDir empty("text_empty");
  CHECK_THROWS_AS(dpt::read_text_corpus(empty.str()), dpt::DataError);
}

TEST_CASE("text: Debian's fortunes is the default corpus", "[text]") {
  const TextCorpus train("", Split::train, 64);
  const TextCorpus val("", Split::test, 64);
  const size_t total = train.bytes().size() + val.bytes().size();
  CHECK(total > 1000000);  // a few MB of text
  CHECK(std::abs(double(val.bytes().size()) - double(total) / 10.0) <= 0.5);
  CHECK(train.size() == (train.bytes().size() - 65) / 64 + 1);

  // Entropy recomputed here with a map, independently of the library's array version.
  std::map<uint8_t, size_t> counts;
  for (uint8_t c : train.bytes()) ++counts[c];
  double h = 0;
  for (auto [c, k] : counts) {
    const double p = double(k) / double(train.bytes().size());
    h -= p * std::log(p);
  }
  CHECK(train.unigram_entropy() == Approx(h).epsilon(1e-12));
  // English text with some ASCII art: about 4.8 bits (3.3 nats) per byte here; far from
  // both a constant (0) and uniform bytes (ln 256 = 5.55).
  CHECK(h > 2.5);
  CHECK(h < 4.0);
}
