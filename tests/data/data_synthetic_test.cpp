// Synthetic datasets and the dataset factory.
#include <catch2/catch.hpp>
#include <cmath>

#include "data/data_error.h"
#include "data/make_dataset.h"
#include "data/synthetic.h"

using dpt::Split;

TEST_CASE("synthetic: regression has ToyModel's shapes and is deterministic", "[synthetic]") {
  const dpt::SyntheticRegression a(64, 10, 5, 7), b(64, 10, 5, 7), c(64, 10, 5, 8);
  const dpt::SyntheticRegression test(64, 10, 5, 7, Split::test);
  std::vector<size_t> all(64);
  for (size_t i = 0; i < 64; ++i) all[i] = i;
  dpt::Batch ba, bb, bc, bt;
  a.fill(all, ba);
  b.fill(all, bb);
  c.fill(all, bc);
  test.fill(all, bt);
  REQUIRE(ba.sample_shape == std::vector<int64_t>{10});
  REQUIRE(ba.x.size() == 640);
  REQUIRE(ba.targets.size() == 320);
  CHECK(ba.labels.empty());
  CHECK(ba.x == bb.x);
  CHECK(ba.targets == bb.targets);
  CHECK(ba.x != bc.x);
  CHECK(ba.x != bt.x);  // the test split draws other samples ...

  // ... from the same teacher: a least-squares fit on train explains test. Fit each output
  // by normal equations on the 11 features (10 inputs + bias), solved by Gauss-Jordan.
  auto fit_residual = [](const dpt::Batch& fit, const dpt::Batch& eval, size_t o) {
    const size_t k = 11, n = fit.n;
    std::vector<double> m(k * (k + 1), 0.0);
    for (size_t s = 0; s < n; ++s) {
      double f[11];
      for (size_t i = 0; i < 10; ++i) f[i] = fit.x[s * 10 + i];
      f[10] = 1.0;
      for (size_t i = 0; i < k; ++i) {
        for (size_t j = 0; j < k; ++j) m[i * (k + 1) + j] += f[i] * f[j];
        m[i * (k + 1) + k] += f[i] * fit.targets[s * 5 + o];
      }
    }
    for (size_t c = 0; c < k; ++c) {
      const double piv = m[c * (k + 1) + c];
      for (size_t j = 0; j <= k; ++j) m[c * (k + 1) + j] /= piv;
      for (size_t r = 0; r < k; ++r) {
        if (r == c) continue;
        const double f = m[r * (k + 1) + c];
        for (size_t j = 0; j <= k; ++j) m[r * (k + 1) + j] -= f * m[c * (k + 1) + j];
      }
    }
    double mse = 0;
    for (size_t s = 0; s < eval.n; ++s) {
      double pred = m[10 * (k + 1) + k];
      for (size_t i = 0; i < 10; ++i) pred += m[i * (k + 1) + k] * eval.x[s * 10 + i];
      mse += std::pow(pred - eval.targets[s * 5 + o], 2);
    }
    return mse / double(eval.n);
  };
  for (size_t o = 0; o < 5; ++o) CHECK(fit_residual(ba, bt, o) < 0.05);  // noise variance 0.01
}

TEST_CASE("synthetic: classification is learnable and deterministic", "[synthetic]") {
  const dpt::SyntheticClassification train(300, 20, 3, 1), test(100, 20, 3, 1, Split::test);
  std::vector<size_t> idx(300);
  for (size_t i = 0; i < 300; ++i) idx[i] = i;
  dpt::Batch bt, be;
  train.fill(idx, bt);
  test.fill(std::span<const size_t>(idx.data(), 100), be);
  REQUIRE(bt.sample_shape == std::vector<int64_t>{20});
  // Nearest class mean, estimated on train, classifies test well.
  std::vector<double> mean(3 * 20, 0.0);
  std::vector<size_t> count(3, 0);
  for (size_t s = 0; s < 300; ++s) {
    REQUIRE(bt.labels[s] >= 0);
    REQUIRE(bt.labels[s] < 3);
    ++count[bt.labels[s]];
    for (size_t f = 0; f < 20; ++f) mean[bt.labels[s] * 20 + f] += bt.x[s * 20 + f];
  }
  for (size_t c = 0; c < 3; ++c) {
    REQUIRE(count[c] > 50);
    for (size_t f = 0; f < 20; ++f) mean[c * 20 + f] /= double(count[c]);
  }
  size_t correct = 0;
  for (size_t s = 0; s < 100; ++s) {
    size_t best = 0;
    double best_d = 1e300;
    for (size_t c = 0; c < 3; ++c) {
      double d = 0;
      for (size_t f = 0; f < 20; ++f) d += std::pow(be.x[s * 20 + f] - mean[c * 20 + f], 2);
      if (d < best_d) best_d = d, best = c;
    }
    correct += best == size_t(be.labels[s]);
  }
  CHECK(correct >= 90);
}

TEST_CASE("make_dataset builds every kind by name", "[synthetic]") {
  dpt::DatasetOptions o;
  o.seed = 3;
  auto reg = dpt::make_dataset("synthetic", "train", o);
  CHECK(reg->name() == "synthetic-regression/train");
  CHECK(reg->size() == 1024);
  auto cls = dpt::make_dataset("synthetic-classification", Split::test, o);
  CHECK(cls->name() == "synthetic-classification/test");
  CHECK(cls->size() == 256);
  o.seq_len = 32;
  auto text = dpt::make_dataset("text", "val", o);
  CHECK(text->name() == "text/test");
  auto fm = dpt::make_dataset("fashion-mnist", "test");
  CHECK(fm->size() == 10000);
  o.path = "/nonexistent-dpt-dir";
  CHECK_THROWS_AS(dpt::make_dataset("cifar10", Split::train, o), dpt::DataError);
  CHECK_THROWS_WITH(
      dpt::make_dataset("imagenet", Split::train),
      Catch::Contains("unknown dataset 'imagenet'") && Catch::Contains("fashion-mnist"));
  CHECK_THROWS_AS(dpt::make_dataset("text", "dev"), std::invalid_argument);
}
