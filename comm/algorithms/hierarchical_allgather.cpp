// Hierarchical allgather, the mirror of hierarchical_reduce_scatter.cpp:
//   1. across hosts: the L ranks with one local rank each run a ring allgather of their
//      blocks, L such rings at once: local rank j holds the blocks of host 0..H-1's
//      local rank j;
//   2. in each host: a ring allgather of those H-block chunks over its L ranks, in the
//      host-major order of hierarchical_blocks.h, then copied to rank order.
// Each host sends (H - 1) / H of the result over its link whatever the launcher's
// numbering. Blocks are copied, never combined: the result is the flat ring's, bit for
// bit. Hosts with different numbers of ranks: the ring in host order. One host, or one
// rank per host: the flat ring.
#include <memory>

#include "comm/algorithms/hierarchical_blocks.h"
#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

static void run(Communicator& c, const CollArgs& a) {
  const Topology& t = c.topology();
  const int L = t.uniform_local_size();
  const Algorithm& ring = *find(CollKind::allgather, "ring");
  if (c.size() == 1 || a.send.count == 0 || t.hosts() == 1 || L == 1) return ring.run(c, a);

  const size_t count = a.send.count;
  const std::vector<int> rank_at = L == 0 ? t.host_order() : host_major_ranks(t);
  std::unique_ptr<char[]> scratch(new char[a.recv.bytes()]);  // every block written below
  Buffer all = a.recv;
  all.data = scratch.get();
  auto ring_into = [&](Communicator& g, const Buffer& data) {  // g's ranks' blocks into data
    CollArgs b = a;
    b.recv = data;
    ring.run(g, b);
  };
  if (L == 0) {
    ring_into(c.host_ordered_group(), all);
  } else {
    const int H = t.hosts();
    Communicator& host = c.host_group();
    const size_t chunk = size_t(H) * count;  // local rank j's: the blocks of host 0..H-1's local rank j
    ring_into(c.cross_host_group(), all.slice(size_t(host.rank()) * chunk, chunk));
    CollArgs b = a;
    b.recv = all;
    b.send = all.slice(size_t(host.rank()) * chunk, chunk);
    ring.run(host, b);
  }
  permute_blocks(rank_at, a.send.bytes(), scratch.get(), static_cast<char*>(a.recv.data), false);
}

// `auto`: as hierarchical_allreduce (several hosts of several ranks each, numbered other
// than in blocks), for results from COMM_HIERARCHICAL_ALLGATHER_MIN_BYTES.
extern const Algorithm hierarchical_allgather;
const Algorithm hierarchical_allgather{
    "hierarchical", CollKind::allgather, run,
    hierarchy_pays,
    {"COMM_HIERARCHICAL_ALLGATHER_MIN_BYTES", 64 * 1024,
     "auto selector: as COMM_HIERARCHICAL_MIN_BYTES, for allgathers of at least this many bytes in all (allgather across "
     "hosts, then within them)"}};

}  // namespace dpt::algo
