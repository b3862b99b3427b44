// Hierarchical allreduce over the communicator's hosts (comm/topology.h), as Horovod's
// hierarchical allreduce and Open MPI's coll/han do:
//   1. reduce-scatter in each host: a ring over its L ranks leaves local rank i with
//      the host's sum of chunk (i + 1) mod L of the buffer;
//   2. across hosts: the L ranks with one local rank each run an allreduce of their
//      chunk with their peers on the other H - 1 hosts, L such allreduces at once, each
//      on 1/L of the buffer (the algorithm `auto` picks for that size and H ranks);
//   3. allgather in each host: the ring again, every rank ends with every chunk.
// Each host sends 2 (H - 1) / H of the buffer over its link whatever the launcher's
// rank numbering, where a flat ring sends 2 (P - 1) / P of it per crossing link, and
// with round-robin numbering every one of its links crosses the network. Every element
// is reduced once, in one order for all ranks: the ranks end bit-identical (the order
// differs from the flat ring's, so the bits may differ from its by rounding).
// Hosts with different numbers of ranks: a ring in host order (crossing the network
// once per host per step). One host, or one rank per host: the flat ring.
#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

static void run(Communicator& c, const CollArgs& a) {
  copy_if_distinct(a.recv, a.send);
  if (c.size() == 1 || a.recv.count == 0) return;
  CollArgs in_place = a;
  in_place.send = a.recv;
  const Topology& t = c.topology();
  const int L = t.uniform_local_size();
  const Algorithm& ring = *find(CollKind::allreduce, "ring");
  if (t.hosts() == 1 || L == 1) return ring.run(c, in_place);
  if (L == 0) return ring.run(c.host_ordered_group(), in_place);

  Communicator& host = c.host_group();
  Communicator& across = c.cross_host_group();
  const ChunkLayout layout{a.recv.count, L};
  ring_reduce_scatter_phase(host, in_place, a.recv, layout, 0);
  const int mine = mod(host.rank() + 1, L);
  const Buffer shard = a.recv.slice(layout.offset(mine), layout.len(mine));
  if (shard.count > 0) {  // empty on every host alike (same layout), so all skip together
    CollArgs b = in_place;
    b.send = b.recv = shard;
    auto_pick(CollKind::allreduce, shard.bytes(), across.size(), c.options().thresholds, across.topology())
        .run(across, b);
  }
  ring_allgather_phase(host, in_place, a.recv, layout, 1, post_allgather_recvs(host, in_place, a.recv, layout, 1));
}

// `auto`: on several hosts with L > 1 ranks each, numbered other than in blocks (the flat
// ring then leaves each host on every link), from COMM_HIERARCHICAL_MIN_BYTES. With block
// numbering the flat ring already crosses each host's link once per step, and on the
// emulated 4 x 2 and 8 x 2 clusters of docs/multihost.md it was 10-15% faster from 4 MiB
// (hierarchical moves more bytes through memory, and those 2-core machines are CPU-bound).
extern const Algorithm hierarchical_allreduce;
const Algorithm hierarchical_allreduce{
    "hierarchical", CollKind::allreduce, run,
    hierarchy_pays,
    {"COMM_HIERARCHICAL_MIN_BYTES", 64 * 1024,
     "auto selector: on several hosts with several ranks each, numbered other than in blocks, allreduce messages of at least this many bytes run "
     "hierarchically (reduce-scatter within hosts, allreduce across them, allgather within)"}};

}  // namespace dpt::algo
