#pragma once
// A communicator over a subset of another one's ranks, made by split(). It runs on the
// parent's point-to-point calls, translating ranks and moving its messages to a tag
// space of its own:  raw tag = (context << 40) | tag, with context derived the same way
// on every member from (parent context, split number, color).
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace dpt {

class SubgroupCommunicator : public Communicator {
 public:
  static constexpr int kContextShift = 40;
  // `root` is the communicator that really moves bytes; `members[i]` is the root rank of
  // this group's rank i.
  SubgroupCommunicator(Communicator& root, std::vector<int> members, int my_rank, uint64_t context);
  ~SubgroupCommunicator() override;
  std::string backend_name() const override { return root_.backend_name(); }
  uint64_t context_id() const { return context_; }
  Communicator& root() { return root_; }
  int root_rank(int r) const { return members_.at(r); }
  void algorithm_begins() override { root_.algorithm_begins(); }
  void algorithm_ends() override { root_.algorithm_ends(); }

 protected:
  WorkPtr do_isend(const Buffer& buf, int peer, int64_t tag) override;
  WorkPtr do_irecv(const Buffer& buf, int peer, int64_t tag) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  int64_t raw_tag(int64_t tag) const;
  Communicator& root_;
  std::vector<int> members_;
  uint64_t context_;
  int split_serial_ = 0;  // splits made from this group; split is collective, so it matches
};

// A group of `c`'s ranks (`members`, ranks of c) chosen from its topology, for
// Communicator::host_group and the like: no message is exchanged. `which` (0, 1, 2)
// gives each of c's topology groups a tag space of its own, above split()'s.
std::unique_ptr<Communicator> make_topology_group(Communicator& c, std::vector<int> members, int my_rank, int which);

// Collective over `parent`: exchanges (color, key), then returns the sorted members of
// this rank's color, or {} for kUndefinedColor.
std::vector<int> split_members(Communicator& parent, int color, int key, int* my_new_rank);

}  // namespace dpt
