// Binomial-tree reduce to `root`.
//   vrank: a rank's position relative to the root, (rank - root) mod n, so the root is 0.
//   In round k (mask = 2^k) a vrank with bit k set sends its partial result to
//   vrank - mask and is done; others receive from vrank + mask (if it exists) and reduce.
//   ceil(log2 n) rounds for any n, so latency grows with log n, not n.
#include <cstring>
#include <vector>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"
#include "comm/reduce_kernels.h"

namespace dpt::algo {

// Reduces into `acc` (which starts as this rank's contribution); on return the root's
// acc holds the full result. Non-root accs hold partial results.
void tree_reduce_into(Communicator& c, const CollArgs& a, const Buffer& acc, int root) {
  const int n = c.size();
  const int vr = mod(c.rank() - root, n);
  std::vector<char> tmp(acc.bytes());
  Buffer in{tmp.data(), acc.count, acc.dtype, acc.device};
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      c.isend_internal(acc, mod(vr - mask + root, n), a.tag)->wait(c.timeout());
      return;
    }
    if (vr + mask < n) {
      c.irecv_internal(in, mod(vr + mask + root, n), a.tag)->wait(c.timeout());
      reduce_into(acc.data, in.data, acc.count, acc.dtype, a.op);
    }
  }
}

static void run(Communicator& c, const CollArgs& a) {
  if (a.send.count == 0) return;
  if (c.rank() == a.root) {
    copy_if_distinct(a.recv, a.send);
    tree_reduce_into(c, a, a.recv, a.root);
  } else {
    // Non-roots must not modify their send buffer: reduce in a scratch copy.
    std::vector<char> scratch(static_cast<const char*>(a.send.data),
                              static_cast<const char*>(a.send.data) + a.send.bytes());
    Buffer acc{scratch.data(), a.send.count, a.send.dtype, a.send.device};
    tree_reduce_into(c, a, acc, a.root);
  }
}

// `auto`: always (reduce has no other algorithm here).
extern const Algorithm tree_reduce;
const Algorithm tree_reduce{"tree", CollKind::reduce, run, always};

}  // namespace dpt::algo
