// Hierarchical reduce-scatter over the communicator's hosts (comm/launch/topology.h): rank r
// ends with block r of the reduction, and each block is reduced in its host first.
//   1. in each host: a ring reduce-scatter over its L ranks of a host-major copy of the
//      send buffer (hierarchical_blocks.h) leaves local rank j with the host's sum of
//      the H blocks that host 0..H-1's local rank j own;
//   2. across hosts: the L ranks with one local rank each run a ring reduce-scatter of
//      those H blocks, L such rings at once: each ends with its own block.
// Each host sends (H - 1) / H of the send buffer (P blocks) over its link whatever the
// launcher's numbering; a flat ring sends (P - 1) blocks per host with block numbering
// and L times that with round-robin numbering. Every element is reduced in one order
// (host sums, then across hosts): exact values match the flat ring bit for bit, others
// within rounding. Hosts with different numbers of ranks: the ring in host order. One
// host, or one rank per host: the flat ring.
#include <memory>

#include "comm/algorithms/hierarchical_blocks.h"
#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

static void run(Communicator& c, const CollArgs& a) {
  const Topology& t = c.topology();
  const int L = t.uniform_local_size();
  const Algorithm& ring = *find(CollKind::reduce_scatter, "ring");
  if (c.size() == 1 || a.recv.count == 0 || t.hosts() == 1 || L == 1) return ring.run(c, a);

  const size_t count = a.recv.count, block = a.recv.bytes();
  const std::vector<int> rank_at = L == 0 ? t.host_order() : host_major_ranks(t);
  std::unique_ptr<char[]> scratch(new char[a.send.bytes()]);  // uninitialised: filled next
  permute_blocks(rank_at, block, scratch.get(), static_cast<char*>(a.send.data), true);
  Buffer all = a.send;
  all.data = scratch.get();
  Buffer mine;
  auto in_place_ring = [&](Communicator& g, const Buffer& data) {  // g's rank ends with its block of data
    CollArgs b = a;
    b.send = data;
    b.recv = data.slice(size_t(g.rank()) * count, count);
    ring.run(g, b);
    mine = b.recv;
  };
  if (L == 0) {
    in_place_ring(c.host_ordered_group(), all);
  } else {
    const int H = t.hosts();
    Communicator& host = c.host_group();
    const ChunkLayout layout{all.count, L};  // chunk j: the H blocks of local rank j
    ring_reduce_scatter_phase(host, a, all, layout, -1);
    in_place_ring(c.cross_host_group(), all.slice(layout.offset(host.rank()), size_t(H) * count));
  }
  std::memcpy(a.recv.data, mine.data, block);
}

// `auto`: as hierarchical_allreduce (several hosts of several ranks each, numbered other
// than in blocks), for send buffers from COMM_HIERARCHICAL_REDUCE_SCATTER_MIN_BYTES.
extern const Algorithm hierarchical_reduce_scatter;
const Algorithm hierarchical_reduce_scatter{
    "hierarchical", CollKind::reduce_scatter, run,
    hierarchy_pays,
    {"COMM_HIERARCHICAL_REDUCE_SCATTER_MIN_BYTES", 64 * 1024,
     "auto selector: as COMM_HIERARCHICAL_MIN_BYTES, for reduce-scatters of at least this many bytes in all (reduce-scatter "
     "within hosts, then across them)"}};

}  // namespace dpt::algo
