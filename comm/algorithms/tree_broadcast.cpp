// Binomial-tree broadcast from `root`.
//   vrank: (rank - root) mod n, so the root is 0. A vrank receives once, from the vrank
//   that differs in its lowest set bit, then forwards to vrank + mask for every smaller
//   power of two mask that exists. ceil(log2 n) rounds for any n.
//   Large buffers are sent in segments so a child can forward segment k while segment
//   k+1 is still arriving (a pipelined tree).
#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

void tree_broadcast_buffer(Communicator& c, const CollArgs& a, const Buffer& buf, int root) {
  const int n = c.size();
  if (n == 1 || buf.count == 0) return;
  const int vr = mod(c.rank() - root, n);
  int parent = -1, mask = 1;
  while (mask < n) {
    if (vr & mask) {
      parent = mod(vr - mask + root, n);
      break;
    }
    mask <<= 1;
  }
  std::vector<int> children;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) children.push_back(mod(vr + mask + root, n));

  const size_t seg = std::max<size_t>(1, c.options().thresholds.segment_bytes / dtype_size(buf.dtype));
  const size_t nseg = (buf.count + seg - 1) / seg;
  std::vector<WorkPtr> recvs(nseg), sends;
  if (parent >= 0)
    for (size_t k = 0; k < nseg; ++k)
      recvs[k] = c.irecv_internal(buf.slice(k * seg, std::min(seg, buf.count - k * seg)), parent, a.tag);
  for (size_t k = 0; k < nseg; ++k) {
    if (recvs[k]) recvs[k]->wait(c.timeout());
    for (int child : children)
      sends.push_back(c.isend_internal(buf.slice(k * seg, std::min(seg, buf.count - k * seg)), child, a.tag));
  }
  for (auto& w : sends) w->wait(c.timeout());
}

static void run(Communicator& c, const CollArgs& a) { tree_broadcast_buffer(c, a, a.recv, a.root); }

// `auto`: always (broadcast has no other algorithm here).
extern const Algorithm tree_broadcast;
const Algorithm tree_broadcast{"tree", CollKind::broadcast, run, always};

}  // namespace dpt::algo
