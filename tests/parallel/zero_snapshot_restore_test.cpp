// Elastic ZeRO's in-memory snapshots (parallel/zero/zero_elastic_snapshot.h) at 4 ranks:
// the exchange keeps R successors' shards, and the restore rebuilds the full state from
// whoever holds the agreed snapshot, whatever their rank in the new group. The snapshots
// of the restore cases are made by hand for worlds of 5 and 6 ranks, as if taken there
// and carried by the 4 members of a later generation; every value is an exact function of
// (shard owner, element), so the expected state is known without the code under test.
#include <algorithm>
#include <numeric>

#include "comm/store/elastic_membership.h"
#include "parallel/zero/zero_elastic_snapshot.h"
#include "tests/support/dist_test.h"

using namespace dpt;

namespace {

constexpr size_t kNumel = 1003;  // not a multiple of 5 or 6: the last shard is padded
const std::vector<std::string> kBuffers = {"exp_avg", "exp_avg_sq"};

// Element i of buffer b (0: parameters) as written by the owner of its shard.
float value(int buffer, size_t i) { return float(buffer * 100000 + int(i)); }

ShardState shard_of(const ShardLayout& L, int q) {
  ShardState s;
  for (int b = 0; b <= int(kBuffers.size()); ++b) {
    std::vector<float> v(L.shard, 0.0f);
    for (size_t k = 0; k < L.shard && L.begin(q) + k < L.numel; ++k) v[k] = value(b, L.begin(q) + k);
    if (b == 0) s.params = std::move(v);
    else s.optimizer.emplace_back(kBuffers[size_t(b - 1)], std::move(v));
  }
  s.optimizer_steps = 77;
  return s;
}

// The snapshot rank q of a W-rank world would hold at (step, generation) with R copies.
ZeroSnapshot made_snapshot(int W, int q, int R, int64_t step, int generation) {
  ZeroSnapshot s;
  s.step = step;
  s.generation = generation;
  s.epoch = 2;
  s.position = 640;
  s.layout = ShardLayout(kNumel, W);
  s.rank = q;
  s.own = shard_of(s.layout, q);
  for (int d = 1; d <= R; ++d) s.copies.push_back(shard_of(s.layout, (q + d) % W));
  return s;
}

size_t wrong_values(const RestoredState& r) {
  size_t bad = r.params.size() != kNumel;
  for (size_t i = 0; i < r.params.size(); ++i) bad += r.params[i] != value(0, i);
  for (size_t b = 0; b < r.optimizer.size(); ++b)
    for (size_t i = 0; i < r.optimizer[b].second.size(); ++i) bad += r.optimizer[b].second[i] != value(int(b + 1), i);
  return bad + (r.optimizer_steps != 77) + (r.epoch != 2) + (r.position != 640);
}

}  // namespace

TEST_CASE("the exchange keeps each rank's R ring successors' shards", "[zero_snapshot]") {
  Communicator& comm = test::world();
  const int n = comm.size(), me = comm.rank();
  const ShardLayout L(kNumel, n);
  for (int R : {1, 2, 3, 5}) {  // 5 > n-1: capped at every other rank
    ZeroSnapshot s = exchange_snapshot(comm, L, shard_of(L, me), 30, 2, 640, 4, R);
    bool ok = int(s.copies.size()) == std::min(R, n - 1);
    for (size_t d = 1; ok && d <= s.copies.size(); ++d) ok = s.copies[d - 1].params == shard_of(L, (me + int(d)) % n).params &&
                                                          s.copies[d - 1].optimizer == shard_of(L, (me + int(d)) % n).optimizer;
    REQUIRE(test::all_ok(ok, "R=" + std::to_string(R) + ": copies of the wrong shards"));
    // Every rank survived: the restore is the exchange's own world.
    const ZeroSnapshot* held[] = {&s};
    RestoredState r = restore_from_snapshots(comm, {held[0]}, kNumel, kBuffers);
    REQUIRE(test::all_ok(wrong_values(r) == 0 && r.step == 30, "R=" + std::to_string(R) + ": restored state differs"));
  }
}

TEST_CASE("the restore follows the snapshot's ranks, not the new group's", "[zero_snapshot]") {
  Communicator& comm = test::world();
  if (comm.size() != 4) return;
  const int me = comm.rank();
  // A 5-rank world lost rank 2; the members were renumbered (as after a generation that
  // formed and failed before training): member m holds snapshot rank from[m].
  const int from[4] = {3, 0, 4, 1};
  ZeroSnapshot s = made_snapshot(5, from[me], 1, 40, 7);
  RestoredState r = restore_from_snapshots(comm, {&s, nullptr}, kNumel, kBuffers);
  REQUIRE(test::all_ok(wrong_values(r) == 0 && r.step == 40, "renumbered holders: restored state differs"));
}

TEST_CASE("two adjacent dead ranks: lost with one copy, whole with two", "[zero_snapshot]") {
  Communicator& comm = test::world();
  if (comm.size() != 4) return;
  const int me = comm.rank();
  const int from[4] = {0, 1, 4, 5};  // ranks 2 and 3 of a 6-rank world died together
  for (int R : {1, 2}) {
    ZeroSnapshot s = made_snapshot(6, from[me], R, 50, 9);
    if (R == 1) {
      std::string what;
      try {
        restore_from_snapshots(comm, {&s}, kNumel, kBuffers);
      } catch (const ElasticError& e) {
        what = e.what();
      }
      REQUIRE(test::all_ok(what.find("old rank(s) [3] is gone") != std::string::npos, "R=1: expected rank 3 lost, got '" + what + "'"));
    } else {
      RestoredState r = restore_from_snapshots(comm, {&s}, kNumel, kBuffers);
      REQUIRE(test::all_ok(wrong_values(r) == 0, "R=2: restored state differs"));
    }
  }
}

TEST_CASE("the oldest committed snapshot by (step, generation) is restored; newcomers hold none", "[zero_snapshot]") {
  Communicator& comm = test::world();
  if (comm.size() != 4) return;
  const int me = comm.rank();
  // Members 0-2 survived a 3-rank world of generation 2 (snapshot of step 60); member 0
  // also finished the next generation's snapshot of the same step (generation 3, a world
  // of 4, with garbage values so that restoring it would show), the others did not.
  // Member 3 is a newcomer.
  ZeroSnapshot old = made_snapshot(3, me, 1, 60, 2);
  ZeroSnapshot newer = made_snapshot(4, me, 1, 60, 3);
  std::fill(newer.own.params.begin(), newer.own.params.end(), -1.0f);
  std::vector<const ZeroSnapshot*> held;
  if (me == 0) held = {&newer, &old};
  else if (me < 3) held = {&old, nullptr};
  RestoredState r = restore_from_snapshots(comm, held, kNumel, kBuffers);
  REQUIRE(test::all_ok(wrong_values(r) == 0 && r.step == 60, "mixed generations: restored state differs"));
}
