// DistributedSampler against PyTorch's semantics, with expectations worked out by hand
// from torch/utils/data/distributed.py.
#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <set>

#include "data/loading/sampler.h"

using dpt::DistributedSampler;
using V = std::vector<size_t>;

namespace {

std::vector<V> all_ranks(size_t n, int r, bool shuffle, uint64_t seed, bool drop_last,
                         uint64_t epoch = 0) {
  std::vector<V> out;
  for (int k = 0; k < r; ++k) {
    DistributedSampler s(n, r, k, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
    REQUIRE(out.back().size() == s.num_samples());
  }
  return out;
}

}  // namespace

TEST_CASE("sampler: N=10, R=3, no shuffle pads from the start", "[sampler]") {
  // total_size = ceil(10/3) * 3 = 12; order 0..9 + [0, 1]; rank r takes r, r+3, ...
  const auto ranks = all_ranks(10, 3, false, 0, false);
  CHECK(ranks[0] == V{0, 3, 6, 9});
  CHECK(ranks[1] == V{1, 4, 7, 0});
  CHECK(ranks[2] == V{2, 5, 8, 1});
  DistributedSampler s(10, 3, 0, false);
  CHECK(s.num_samples() == 4);
  CHECK(s.total_size() == 12);
}

TEST_CASE("sampler: N=10, R=3, drop_last trims the tail", "[sampler]") {
  // PyTorch: num_samples = ceil((10 - 3) / 3) = 3, total_size 9, index 9 dropped.
  const auto ranks = all_ranks(10, 3, false, 0, true);
  CHECK(ranks[0] == V{0, 3, 6});
  CHECK(ranks[1] == V{1, 4, 7});
  CHECK(ranks[2] == V{2, 5, 8});
}

TEST_CASE("sampler: padding larger than the dataset repeats it several times", "[sampler]") {
  // N=2, R=5: num_samples 1, total 5, order [0, 1] * 3 cut to [0, 1, 0, 1, 0].
  const auto ranks = all_ranks(2, 5, false, 0, false);
  CHECK(ranks == std::vector<V>{{0}, {1}, {0}, {1}, {0}});
  // N=3, R=8: ceil(3/8) = 1, order [0,1,2,0,1,2,0,1].
  CHECK(all_ranks(3, 8, false, 0, false) == std::vector<V>{{0}, {1}, {2}, {0}, {1}, {2}, {0}, {1}});
  // drop_last with N < R: every rank gets nothing.
  for (const auto& r : all_ranks(2, 5, false, 0, true)) CHECK(r.empty());
  // N divisible by R: drop_last changes nothing.
  CHECK(all_ranks(12, 4, false, 0, true) == all_ranks(12, 4, false, 0, false));
  CHECK(all_ranks(12, 4, false, 0, false)[3] == V{3, 7, 11});
}

TEST_CASE("sampler: one replica is the whole dataset", "[sampler]") {
  CHECK(all_ranks(5, 1, false, 0, false)[0] == V{0, 1, 2, 3, 4});
  auto shuffled = all_ranks(5, 1, true, 3, false)[0];
  std::sort(shuffled.begin(), shuffled.end());
  CHECK(shuffled == V{0, 1, 2, 3, 4});
}

TEST_CASE("sampler: shuffled ranks follow the seeded permutation", "[sampler]") {
  const size_t n = 103;
  const int r = 4;
  const uint64_t seed = 42, epoch = 3;
  const V order = dpt::shuffled_range(n, seed + epoch);
  const auto ranks = all_ranks(n, r, true, seed, false, epoch);
  // total_size 104: order padded with order[0]; rank k takes positions k, k+4, ...
  for (int k = 0; k < r; ++k) {
    for (size_t i = 0; i < ranks[k].size(); ++i) {
      const size_t p = size_t(k) + i * size_t(r);
      CHECK(ranks[k][i] == order[p % n]);
    }
  }
  CHECK(ranks[3].back() == order[0]);  // the one padded position
}

TEST_CASE("sampler: the union over ranks covers every index", "[sampler]") {
  for (size_t n : {1, 7, 10, 64, 101}) {
    for (int r : {1, 2, 3, 4, 8}) {
      for (bool shuffle : {false, true}) {
        std::set<size_t> seen;
        size_t count = 0;
        for (const auto& idx : all_ranks(n, r, shuffle, 7, false, 1)) {
          seen.insert(idx.begin(), idx.end());
          count += idx.size();
        }
        INFO("n=" << n << " r=" << r << " shuffle=" << shuffle);
        CHECK(seen.size() == n);
        CHECK(*seen.rbegin() == n - 1);
        CHECK(count == (n + size_t(r) - 1) / size_t(r) * size_t(r));
        // drop_last: no index twice, and exactly floor(n/r)*r of them.
        std::multiset<size_t> dropped;
        for (const auto& idx : all_ranks(n, r, shuffle, 7, true, 1))
          dropped.insert(idx.begin(), idx.end());
        CHECK(dropped.size() == n / size_t(r) * size_t(r));
        CHECK(std::set<size_t>(dropped.begin(), dropped.end()).size() == dropped.size());
      }
    }
  }
}

TEST_CASE("sampler: shuffle depends on seed + epoch only", "[sampler]") {
  DistributedSampler a(1000, 2, 1, true, 10), b(1000, 2, 1, true, 10), c(1000, 2, 1, true, 12);
  a.set_epoch(0);
  b.set_epoch(0);
  CHECK(a.indices() == b.indices());
  const V e0 = a.indices();
  a.set_epoch(1);
  CHECK(a.indices() != e0);
  CHECK(a.indices() == a.indices());  // indices() does not advance anything
  a.set_epoch(2);
  CHECK(a.indices() == c.indices());  // seed 10 + epoch 2 == seed 12 + epoch 0, as in torch
  DistributedSampler d(1000, 2, 1, true, 11);
  CHECK(d.indices() != e0);

  const V perm = dpt::shuffled_range(1000, 5);
  V sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  V iota(1000);
  std::iota(iota.begin(), iota.end(), size_t(0));
  CHECK(sorted == iota);
  CHECK(perm != iota);
}

TEST_CASE("sampler: the permutation is pinned for a seed", "[sampler]") {
  // Guards against an accidental change of generator or algorithm: runs resumed from a
  // checkpoint rely on reproducing the same order. The expected values were computed by an
  // independent Python implementation of mt19937_64 and the documented Fisher-Yates with
  // rejection sampling (for i = n..2: j = uniform_below(i), swap v[i-1], v[j]).
  CHECK(dpt::shuffled_range(10, 0) == V{7, 2, 0, 8, 3, 9, 6, 1, 5, 4});
}

TEST_CASE("sampler: invalid arguments", "[sampler]") {
  CHECK_THROWS_AS(DistributedSampler(10, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(DistributedSampler(10, 3, 3), std::invalid_argument);
  CHECK_THROWS_AS(DistributedSampler(10, 3, -1), std::invalid_argument);
  DistributedSampler empty(0, 2, 1);
  CHECK(empty.indices().empty());
  CHECK(empty.num_samples() == 0);
}

TEST_CASE("sampler: a pass from a start position re-shards what is left of the epoch", "[sampler]") {
  // 4 ranks x 2 samples per step, 3 steps: order[0, 24) consumed. 3 ranks go on from 24:
  // together they take order[24, 40) once each (16 left: 6 per rank, padded by 2).
  const size_t n = 40;
  std::vector<size_t> order = dpt::shuffled_range(n, 7 + 1);
  std::multiset<size_t> seen;
  for (int k = 0; k < 4; ++k) {
    DistributedSampler s(n, 4, k, true, 7);
    s.set_epoch(1);
    const V mine = s.indices();
    for (size_t j = 0; j < 3 * 2; ++j) seen.insert(mine[j]);  // 3 steps of batch 2
  }
  for (int k = 0; k < 3; ++k) {
    DistributedSampler s(n, 3, k, true, 7);
    s.set_epoch(1);
    s.set_start(24);
    CHECK(s.num_samples() == 6);
    const V mine = s.indices();
    REQUIRE(mine.size() == 6);
    CHECK(mine[0] == order[24 + size_t(k)]);  // rank k starts at start + k, stride 3
    CHECK(mine[1] == order[24 + size_t(k) + 3]);
    for (size_t j = 0; j < 5; ++j) seen.insert(mine[j]);  // 16 = 5 + 5 + 5 + 1 real ones...
    if (k == 0) seen.insert(mine[5]);                     // ... the 16th is rank 0's last
  }
  // Every index of the epoch exactly once: the first pass's 24 and the 16 left.
  CHECK(seen.size() == n);
  for (size_t i = 0; i < n; ++i) CHECK(seen.count(i) == 1);
  // Start 0 is the plain sampler, bit for bit.
  DistributedSampler a(n, 3, 2, true, 7), b(n, 3, 2, true, 7);
  a.set_epoch(3), b.set_epoch(3);
  b.set_start(0);
  CHECK(a.indices() == b.indices());
  // Past the end: refused.
  CHECK_THROWS_AS(b.set_start(n + 1), std::invalid_argument);
  b.set_start(n);
  CHECK(b.num_samples() == 0);
  CHECK(b.indices().empty());
}
