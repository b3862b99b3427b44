// DataLoader: batches follow the sampler, runs are deterministic for a seed, filling
// happens on a background thread, and an exception raised there reaches the caller.
#include <atomic>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>

#include "data/loading/loader.h"
#include "data/synthetic.h"

using dpt::Batch;
using dpt::DataLoader;
using dpt::DistributedSampler;

namespace {

// Sample i is the single float i; records the threads that filled batches.
class IndexDataset : public dpt::Dataset {
 public:
  explicit IndexDataset(size_t n, size_t throw_at = SIZE_MAX) : n_(n), throw_at_(throw_at) {}
  size_t size() const override { return n_; }
  void fill(std::span<const size_t> indices, Batch& out) const override {
    dpt::check_indices(*this, indices);
    last_thread_ = std::this_thread::get_id();
    ++fills_;
    out.n = indices.size();
    out.sample_shape = {1};
    out.x.resize(indices.size());
    out.labels.resize(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] == throw_at_)
        throw std::runtime_error("cannot read sample " + std::to_string(throw_at_));
      out.x[i] = float(indices[i]);
      out.labels[i] = int32_t(indices[i]);
    }
  }
  std::string name() const override { return "index"; }
  mutable std::atomic<std::thread::id> last_thread_{};
  mutable std::atomic<int> fills_{0};

 private:
  size_t n_, throw_at_;
};

std::vector<size_t> drain(DataLoader& loader, std::vector<size_t>* sizes = nullptr) {
  std::vector<size_t> seen;
  Batch b;
  while (loader.next(b)) {
    for (int32_t l : b.labels) seen.push_back(size_t(l));
    if (sizes) sizes->push_back(b.n);
  }
  return seen;
}

}  // namespace

TEST_CASE("loader: batches are this rank's sampler indices, in order", "[loader]") {
  for (size_t prefetch : {0, 1, 2, 5}) {
    IndexDataset ds(103);
    DistributedSampler sampler(103, 2, 1, true, 9);
    DataLoader loader(ds, sampler, 10, false, prefetch);
    CHECK(loader.num_batches() == 6);  // 52 samples: 5 full batches and one of 2
    loader.reset(4);
    std::vector<size_t> sizes;
    const auto seen = drain(loader, &sizes);
    CHECK(seen == sampler.indices());
    CHECK(sampler.epoch() == 4);
    CHECK(sizes == std::vector<size_t>{10, 10, 10, 10, 10, 2});
    Batch b;
    CHECK_FALSE(loader.next(b));  // stays at the end until reset
  }
}

TEST_CASE("loader: drop_last_batch drops the short batch", "[loader]") {
  IndexDataset ds(103);
  DistributedSampler sampler(103, 2, 0, false);
  DataLoader loader(ds, sampler, 10, true);
  CHECK(loader.num_batches() == 5);
  std::vector<size_t> sizes;
  const auto seen = drain(loader, &sizes);
  CHECK(sizes == std::vector<size_t>(5, 10));
  const auto all = sampler.indices();
  CHECK(seen == std::vector<size_t>(all.begin(), all.begin() + 50));
}

TEST_CASE("loader: deterministic for a seed, different across epochs", "[loader]") {
  const dpt::SyntheticClassification ds(200, 16, 4, 123);
  auto run = [&](uint64_t seed, uint64_t epoch) {
    DistributedSampler sampler(ds.size(), 3, 2, true, seed);
    DataLoader loader(ds, sampler, 16, false, 3);
    loader.reset(epoch);
    std::vector<float> xs;
    std::vector<int32_t> labels;
    Batch b;
    while (loader.next(b)) {
      xs.insert(xs.end(), b.x.begin(), b.x.end());
      labels.insert(labels.end(), b.labels.begin(), b.labels.end());
    }
    return std::make_pair(xs, labels);
  };
  const auto a = run(5, 1);
  CHECK(a.first.size() == 67 * 16);
  CHECK(a == run(5, 1));
  CHECK(a != run(5, 2));
  CHECK(a != run(6, 1));
}

TEST_CASE("loader: fills on a background thread", "[loader]") {
  IndexDataset ds(40);
  DistributedSampler sampler(40, 1, 0, false);
  DataLoader loader(ds, sampler, 4, false, 2);
  Batch b;
  REQUIRE(loader.next(b));
  CHECK(ds.last_thread_.load() != std::this_thread::get_id());

  DataLoader inline_loader(ds, sampler, 4, false, 0);
  REQUIRE(inline_loader.next(b));
  CHECK(ds.last_thread_.load() == std::this_thread::get_id());
}

TEST_CASE("loader: an exception while filling reaches next()", "[loader]") {
  for (size_t prefetch : {0, 1, 3}) {
    INFO("prefetch " << prefetch);
    IndexDataset ds(50, 23);  // sample 23 is in batch 2 (samples 20..29)
    DistributedSampler sampler(50, 1, 0, false);
    DataLoader loader(ds, sampler, 10, false, prefetch);
    Batch b;
    REQUIRE(loader.next(b));  // batches before the bad one still arrive, in order
    CHECK(b.labels.front() == 0);
    REQUIRE(loader.next(b));
    CHECK(b.labels.front() == 10);
    CHECK_THROWS_WITH(loader.next(b), "cannot read sample 23");
    CHECK_THROWS_WITH(loader.next(b), "cannot read sample 23");  // sticky, never lost
    loader.reset(1);  // a new epoch starts clean and fails again at the same place
    REQUIRE(loader.next(b));
    REQUIRE(loader.next(b));
    CHECK_THROWS_AS(loader.next(b), std::runtime_error);
  }
}

TEST_CASE("loader: destruction and reset mid-epoch join the worker", "[loader]") {
  IndexDataset ds(1000);
  DistributedSampler sampler(1000, 1, 0, false);
  {
    DataLoader loader(ds, sampler, 1, false, 2);
    Batch b;
    REQUIRE(loader.next(b));
    // The worker is now blocked on a full queue; the destructor must wake and join it.
  }
  { DataLoader never_started(ds, sampler, 1); }
  DataLoader loader(ds, sampler, 7, false, 2);
  Batch b;
  REQUIRE(loader.next(b));
  REQUIRE(loader.next(b));
  loader.reset(0);  // abandons the queued batches
  REQUIRE(loader.next(b));
  CHECK(b.labels.front() == 0);
  std::vector<size_t> rest = drain(loader);
  CHECK(rest.size() == 993);
  CHECK(rest.back() == 999);
}

TEST_CASE("loader: invalid arguments", "[loader]") {
  IndexDataset ds(10);
  DistributedSampler sampler(10, 1, 0);
  DistributedSampler wrong(11, 1, 0);
  CHECK_THROWS_AS(DataLoader(ds, sampler, 0), std::invalid_argument);
  CHECK_THROWS_AS(DataLoader(ds, wrong, 2), std::invalid_argument);
}
