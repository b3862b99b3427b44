// Topology (comm/launch/topology.h): hosts from host digests whatever the rank numbering,
// local ranks, uniformity, host order, COMM_FAKE_HOSTS; and the selector's use of it.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "comm/algorithms/registry.h"
#include "comm/launch/topology.h"

using dpt::Topology;

TEST_CASE("hosts are numbered by their lowest rank, ranks in order within", "[topology]") {
  // Round robin over 3 hosts (digests 7, 9, 5), as Slurm's cyclic distribution numbers them.
  const std::vector<uint64_t> d{7, 9, 5, 7, 9, 5};
  const Topology t(d, 4);
  CHECK(t.hosts() == 3);
  CHECK(t.my_host() == 1);  // digest 9 first appears at rank 1
  CHECK(t.local_rank() == 1);
  CHECK(t.ranks_of_host(0) == std::vector<int>{0, 3});
  CHECK(t.ranks_of_host(2) == std::vector<int>{2, 5});
  CHECK(t.uniform_local_size() == 2);
  CHECK(t.host_order() == std::vector<int>{0, 3, 1, 4, 2, 5});
  CHECK(t.describe() == "3 hosts x 2 ranks");
}

TEST_CASE("hosts of different sizes are not uniform", "[topology]") {
  const Topology t({1, 1, 1, 2}, 3);
  CHECK(t.hosts() == 2);
  CHECK(t.uniform_local_size() == 0);
  CHECK(t.local_rank() == 0);
  CHECK(t.describe() == "2 hosts (1-3 ranks each)");
}

TEST_CASE("a subgroup keeps its members' hosts", "[topology]") {
  const Topology world({1, 2, 1, 2, 1, 2}, 0);
  const Topology sub = Topology::of_members(world, {5, 0, 3}, 1);  // hosts 2, 1, 2
  CHECK(sub.hosts() == 2);
  CHECK(sub.ranks_of_host(0) == std::vector<int>{0, 2});
  CHECK(sub.my_host() == 1);
}

TEST_CASE("COMM_FAKE_HOSTS numbers hosts by blocks or round robin, and refuses nonsense", "[topology]") {
  const std::vector<uint64_t> same(6, 42);
  ::setenv("COMM_FAKE_HOSTS", "3", 1);
  CHECK(Topology(dpt::apply_fake_hosts(same), 0).ranks_of_host(0) == std::vector<int>{0, 1});
  ::setenv("COMM_FAKE_HOSTS", "3:cyclic", 1);
  CHECK(Topology(dpt::apply_fake_hosts(same), 0).ranks_of_host(0) == std::vector<int>{0, 3});
  for (const char* bad : {"0", "x", "2:diagonal", "3x"}) {
    ::setenv("COMM_FAKE_HOSTS", bad, 1);
    CHECK_THROWS_WITH(dpt::apply_fake_hosts(same), Catch::Contains("COMM_FAKE_HOSTS"));
  }
  ::unsetenv("COMM_FAKE_HOSTS");
  CHECK(Topology(dpt::apply_fake_hosts(same), 0).hosts() == 1);
}

TEST_CASE("auto takes the hierarchical allreduce on several hosts with several ranks each, numbered round robin", "[topology]") {
  using dpt::CollKind;
  const dpt::AlgoThresholds th;
  const Topology two_by_two({1, 2, 1, 2}, 0), one_host({1, 1, 1, 1}, 0), one_each({1, 2, 3, 4}, 0),
      uneven({1, 2, 1, 1}, 0), blocks({1, 1, 2, 2}, 0);
  auto pick = [&](const Topology& t, size_t bytes) { return std::string(dpt::algo::auto_pick(CollKind::allreduce, bytes, 4, th, t).name); };
  CHECK(pick(two_by_two, 16 << 20) == "hierarchical");
  CHECK(pick(one_host, 16 << 20) == "ring");
  CHECK(pick(one_each, 16 << 20) == "ring");
  CHECK(pick(uneven, 16 << 20) == "ring");
  // Block numbering: the flat ring leaves each host once per step, but sends 2 (P-1)/P of
  // the buffer over each link against the hierarchy's 2 (H-1)/H: 2 x 2, 33% fewer bytes,
  // hierarchical from 4x COMM_HIERARCHICAL_MIN_BYTES (256 KiB); below, the ring.
  CHECK(pick(blocks, 16 << 20) == "hierarchical");
  CHECK(pick(blocks, 256 << 10) == "hierarchical");
  CHECK(pick(blocks, 128 << 10) == "ring");
  CHECK(!blocks.host_order().empty());
  CHECK(blocks.host_contiguous());
  CHECK(!two_by_two.host_contiguous());
  CHECK(pick(two_by_two, 1024) != "hierarchical");  // below COMM_HIERARCHICAL_MIN_BYTES
  CHECK(std::string(dpt::algo::auto_pick(CollKind::broadcast, 16 << 20, 4, th, two_by_two).name) == "hierarchical");
  for (CollKind k : {CollKind::reduce_scatter, CollKind::allgather}) {  // the same rule, their own thresholds
    auto pick_k = [&](const Topology& t, size_t bytes) { return std::string(dpt::algo::auto_pick(k, bytes, 4, th, t).name); };
    CHECK(pick_k(two_by_two, 16 << 20) == "hierarchical");
    CHECK(pick_k(blocks, 16 << 20) == "ring");
    CHECK(pick_k(uneven, 16 << 20) == "ring");
    CHECK(pick_k(two_by_two, 1024) == "ring");
  }
}

TEST_CASE("auto across hosts: the tree up to a quarter of its threshold, the hierarchy in blocks where it saves 10%", "[topology]") {
  using dpt::CollKind;
  const dpt::AlgoThresholds th;
  auto hosts_of = [](int hosts, int local) {
    std::vector<uint64_t> d;
    for (int h = 0; h < hosts; ++h)
      for (int l = 0; l < local; ++l) d.push_back(uint64_t(h + 1));
    return Topology(d, 0);
  };
  const Topology four_by_two = hosts_of(4, 2), eight_by_two = hosts_of(8, 2), one_host = hosts_of(1, 8);
  auto pick = [&](const Topology& t, int world, size_t bytes) {
    return std::string(dpt::algo::auto_pick(CollKind::allreduce, bytes, world, th, t).name);
  };
  // The tree: 256 KiB on one host, 64 KiB across hosts (measured: 1.4x the ring's time at
  // 256 KiB on 4 emulated hosts x 2 at 1 Gbit/s, 0.5x at 64 KiB).
  CHECK(pick(one_host, 8, 256 << 10) == "tree");
  CHECK(pick(four_by_two, 8, 64 << 10) == "tree");
  CHECK(pick(four_by_two, 8, 128 << 10) == "ring");
  CHECK(pick(four_by_two, 8, 256 << 10) == "hierarchical");
  CHECK(pick(eight_by_two, 16, 256 << 10) == "ring");
  // 4 x 2 in blocks: 2 * 3/4 against 2 * 7/8 of the buffer per link, 14% fewer bytes.
  CHECK(pick(four_by_two, 8, 1 << 20) == "hierarchical");
  CHECK(pick(four_by_two, 8, 64 << 20) == "hierarchical");
  // 8 x 2 in blocks: 7/8 against 15/16, 6.7% fewer: the ring (docs/multihost.md measured
  // it 10-15% faster there).
  CHECK(pick(eight_by_two, 16, 64 << 20) == "ring");
}
