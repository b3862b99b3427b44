#pragma once
// Topology: which ranks of a communicator share a host, from each rank's host id
// (comm/launch/host_identity.h; a network namespace is a host).
//
// Terms:
//   host        - a group of ranks with the same host id. Hosts are numbered in the
//                 order of their lowest rank, so every rank computes the same numbering.
//   local rank  - a rank's position among its host's ranks (by rank).
//   uniform     - every host has the same number of ranks (local size L); the
//                 hierarchical algorithms need it (host h's local rank i and host h''s
//                 local rank i own the same shard).
//   host order  - the ranks sorted by (host, local rank): a ring in this order crosses
//                 the network once per host, whatever order the launcher numbered them
//                 in (Slurm's cyclic distribution, mpirun --map-by node).
// COMM_FAKE_HOSTS=H[:block|:cyclic] replaces the host ids by H hosts numbered by blocks
// of ranks or round robin: a test and benchmark knob to run the hierarchical algorithms
// on one machine (bytes still move through this machine's memory, not a network).
#include <cstdint>
#include <string>
#include <vector>

namespace dpt {

class Topology {
 public:
  Topology() = default;  // one rank on one host
  // `digests[r]` is rank r's host_id_digest; `rank` is this process's rank.
  Topology(const std::vector<uint64_t>& digests, int rank);
  // The same host structure as `parent` restricted to `members` (parent ranks, in the
  // subgroup's rank order); `rank` is this process's rank in the subgroup.
  static Topology of_members(const Topology& parent, const std::vector<int>& members, int rank);

  int hosts() const { return int(host_ranks_.size()); }
  int host_of(int rank) const { return host_of_.at(size_t(rank)); }
  int my_host() const { return host_of(rank_); }
  int local_rank() const { return local_rank_; }
  // Ranks of host h, ascending.
  const std::vector<int>& ranks_of_host(int h) const { return host_ranks_.at(size_t(h)); }
  // L when every host has L ranks, else 0.
  int uniform_local_size() const { return uniform_; }
  // All ranks in host order (see above).
  std::vector<int> host_order() const;
  // Whether rank order already is host order (each host's ranks consecutive).
  bool host_contiguous() const;
  // E.g. "4 hosts x 2 ranks" or "3 hosts (1-3 ranks each)", for logs and benches.
  std::string describe() const;

 private:
  void finish();
  int rank_ = 0;
  std::vector<int> host_of_{0};
  std::vector<std::vector<int>> host_ranks_{{0}};
  int local_rank_ = 0;
  int uniform_ = 1;
};

// The digests after COMM_FAKE_HOSTS (unchanged when it is unset); std::invalid_argument
// naming the variable on a bad value.
std::vector<uint64_t> apply_fake_hosts(std::vector<uint64_t> digests);

}  // namespace dpt
