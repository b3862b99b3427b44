// Hierarchical broadcast: the root's message crosses the network once per host.
//   1. across hosts: a tree broadcast among one leader per host (the root on its own
//      host, the lowest rank on the others);
//   2. in each host: a tree broadcast from its leader.
// A flat binomial tree's edges cross hosts wherever the numbering puts them; with
// round-robin numbering nearly all do.
#include <algorithm>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

void tree_broadcast_buffer(Communicator& c, const CollArgs& a, const Buffer& buf, int root);

static void run(Communicator& c, const CollArgs& a) {
  const Topology& t = c.topology();
  if (c.size() == 1 || a.recv.count == 0) return;
  if (t.hosts() == 1) return tree_broadcast_buffer(c, a, a.recv, a.root);
  const int root_host = t.host_of(a.root);
  auto leader_of = [&](int h) { return h == root_host ? a.root : t.ranks_of_host(h).front(); };
  // Leaders: ranks of an ad-hoc group in host order; the group is the host-ordered
  // communicator's view of them, so step 1 runs over messages between leaders only.
  Communicator& ordered = c.host_ordered_group();
  const std::vector<int> order = t.host_order();
  std::vector<int> position(order.size());
  for (size_t i = 0; i < order.size(); ++i) position[size_t(order[i])] = int(i);
  if (c.rank() == leader_of(t.my_host())) {
    // A binomial tree over the H leaders, written on the host-ordered group's ranks.
    const int H = t.hosts(), me = t.my_host();
    const int vr = mod(me - root_host, H);
    int mask = 1;
    while (mask < H && !(vr & mask)) mask <<= 1;
    if (vr != 0) ordered.irecv_internal(a.recv, position[size_t(leader_of(mod(vr - mask + root_host, H)))], a.tag)
                     ->wait(c.timeout());
    std::vector<WorkPtr> sends;
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (vr + mask < H)
        sends.push_back(ordered.isend_internal(a.recv, position[size_t(leader_of(mod(vr + mask + root_host, H)))], a.tag));
    for (auto& w : sends) w->wait(c.timeout());
  }
  Communicator& host = c.host_group();
  const auto& mine = t.ranks_of_host(t.my_host());
  const int local_leader = int(std::find(mine.begin(), mine.end(), leader_of(t.my_host())) - mine.begin());
  tree_broadcast_buffer(host, a, a.recv, local_leader);
}

// `auto`: as hierarchical_allreduce (rank numbering other than blocks), from
// COMM_HIERARCHICAL_BCAST_MIN_BYTES.
extern const Algorithm hierarchical_broadcast;
const Algorithm hierarchical_broadcast{
    "hierarchical", CollKind::broadcast, run,
    hierarchy_pays,
    {"COMM_HIERARCHICAL_BCAST_MIN_BYTES", 64 * 1024,
     "auto selector: on several hosts with several ranks each, numbered other than in blocks, broadcasts of at least this many bytes cross the network "
     "once per host (a tree over one leader per host, then a tree in each host)"}};

}  // namespace dpt::algo
