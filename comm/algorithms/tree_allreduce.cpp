// Tree allreduce: a binomial-tree reduce to rank 0, then a binomial-tree broadcast.
//   2*ceil(log2 n) message latencies for any world size (powers of two or not), against
//   the ring's 2(n-1): the choice for small messages, where latency dominates. Every rank
//   receives rank 0's bytes, so results are bit-identical across ranks.
#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

void tree_reduce_into(Communicator& c, const CollArgs& a, const Buffer& acc, int root);
void tree_broadcast_buffer(Communicator& c, const CollArgs& a, const Buffer& buf, int root);

static void run(Communicator& c, const CollArgs& a) {
  copy_if_distinct(a.recv, a.send);
  if (c.size() == 1 || a.recv.count == 0) return;
  tree_reduce_into(c, a, a.recv, 0);
  tree_broadcast_buffer(c, a, a.recv, 0);
}

// `auto`: allreduce up to COMM_TREE_MAX_BYTES, where latency dominates (256 KiB measured,
// bench/compare.sh), a quarter of it across hosts (registry.h).
extern const Algorithm tree_allreduce;
const Algorithm tree_allreduce{
    "tree", CollKind::allreduce, run, up_to_threshold_per_hosts,
    {"COMM_TREE_MAX_BYTES", 256 * 1024,
     "auto selector: allreduce messages up to this many bytes use the tree (across hosts a quarter of it), larger ones the ring"}};

}  // namespace dpt::algo
