#include "comm/dispatch/subgroup_communicator.h"

#include <algorithm>
#include <array>

namespace dpt {

SubgroupCommunicator::SubgroupCommunicator(Communicator& root, std::vector<int> members, int my_rank,
                                           uint64_t context)
    : Communicator(my_rank, static_cast<int>(members.size()), root.options()),
      root_(root), members_(std::move(members)), context_(context) {
  set_topology(Topology::of_members(root.topology(), members_, my_rank));
}

SubgroupCommunicator::~SubgroupCommunicator() { shutdown_worker(); }

int64_t SubgroupCommunicator::raw_tag(int64_t tag) const {
  if (tag < 0 || tag >= (int64_t{1} << kContextShift))
    throw UsageError(context("send/recv"), "tag " + std::to_string(tag) + " out of range for a subgroup");
  return static_cast<int64_t>(context_ << kContextShift) | tag;
}

WorkPtr SubgroupCommunicator::do_isend(const Buffer& buf, int peer, int64_t tag) {
  return root_.isend_internal(buf, members_.at(peer), raw_tag(tag));
}

WorkPtr SubgroupCommunicator::do_irecv(const Buffer& buf, int peer, int64_t tag) {
  return root_.irecv_internal(buf, members_.at(peer), raw_tag(tag));
}

std::unique_ptr<Communicator> SubgroupCommunicator::do_split(int color, int key) {
  int new_rank = -1;
  std::vector<int> mine = split_members(*this, color, key, &new_rank);
  const uint64_t serial = uint64_t(++split_serial_);  // counted on every rank (Communicator::do_split)
  if (mine.empty()) return nullptr;
  // Children talk to the root directly (no nesting of tag spaces); their context is a
  // hash of ours, the split number and the color, identical on all members.
  std::vector<int> root_members;
  for (int m : mine) root_members.push_back(members_[m]);
  uint64_t h = context_ * 1000003u + serial * 7919u + uint64_t(color) * 104729u;
  uint64_t ctx = 1 + (h % ((uint64_t{1} << 22) - 2));
  return std::make_unique<SubgroupCommunicator>(root_, root_members, new_rank, ctx);
}

std::unique_ptr<Communicator> make_topology_group(Communicator& c, std::vector<int> members, int my_rank, int which) {
  // split()'s contexts are hashes in [1, 2^22 - 2]; these lie above, so a topology
  // group's messages never meet a split's. A raw tag (context << 40 | tag) stays < 2^63.
  constexpr uint64_t kBase = uint64_t{1} << 22;
  if (auto* sub = dynamic_cast<SubgroupCommunicator*>(&c)) {
    // Groups of a subgroup talk to its root directly, like its splits.
    for (int& m : members) m = sub->root_rank(m);
    const uint64_t ctx = kBase + 3 + (sub->context_id() * 3 + uint64_t(which)) % (kBase - 4);
    return std::make_unique<SubgroupCommunicator>(sub->root(), std::move(members), my_rank, ctx);
  }
  return std::make_unique<SubgroupCommunicator>(c, std::move(members), my_rank, kBase + uint64_t(which));
}

std::vector<int> split_members(Communicator& parent, int color, int key, int* my_new_rank) {
  const int n = parent.size();
  std::array<int32_t, 2> mine{color, key};
  std::vector<int32_t> all(2 * size_t(n));
  parent.allgather(make_buffer(mine.data(), 2), make_buffer(all.data(), all.size()));
  if (color == Communicator::kUndefinedColor) return {};
  std::vector<std::pair<int, int>> order;  // (key, parent rank)
  for (int i = 0; i < n; ++i)
    if (all[2 * i] == color) order.emplace_back(all[2 * i + 1], i);
  std::sort(order.begin(), order.end());
  std::vector<int> members;
  for (auto& [k, r] : order) {
    if (r == parent.rank()) *my_new_rank = static_cast<int>(members.size());
    members.push_back(r);
  }
  return members;
}

}  // namespace dpt
