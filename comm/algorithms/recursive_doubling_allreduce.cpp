// Recursive-doubling allreduce: log2 rounds of pairwise exchange.
//   p:       the largest power of two <= n. Ranks p..n-1 are "extra": each first hands
//            its buffer to rank r-p (the fold), waits, and gets the result back at the
//            end (the unfold).
//   round k: rank r (< p) exchanges its whole buffer with partner r XOR 2^k and both
//            reduce; after round k every group of 2^(k+1) ranks holds the same values.
//   Latency: log2(p) message times (+2 with extra ranks), against the tree's 2 log2(n):
//   the choice for the smallest messages. Each round moves the whole buffer, so it
//   loses to the tree and the ring as messages grow. Both partners reduce
//   (lower rank's values) op (higher rank's values), so every rank ends with the same
//   bits even for min/max with NaN.
#include <vector>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"
#include "comm/reduce_kernels.h"

namespace dpt::algo {

static void run(Communicator& c, const CollArgs& a) {
  copy_if_distinct(a.recv, a.send);
  const int n = c.size(), r = c.rank();
  if (n == 1 || a.recv.count == 0) return;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const Buffer& mine = a.recv;
  std::vector<char> scratch(mine.bytes());
  const Buffer theirs{scratch.data(), mine.count, mine.dtype, mine.device};

  if (r >= p) {  // extra rank: fold into r-p, then receive the result
    c.isend_internal(mine, r - p, a.tag)->wait(c.timeout());
    c.irecv_internal(mine, r - p, a.tag)->wait(c.timeout());
    return;
  }
  if (r + p < n) {
    c.irecv_internal(theirs, r + p, a.tag)->wait(c.timeout());
    reduce_into(mine.data, theirs.data, mine.count, mine.dtype, a.op);  // r < r+p: mine first
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    const int partner = r ^ mask;
    WorkPtr rw = c.irecv_internal(theirs, partner, a.tag);
    WorkPtr sw = c.isend_internal(mine, partner, a.tag);
    wait_all({rw, sw}, c.timeout());
    if (r < partner) reduce_into(mine.data, theirs.data, mine.count, mine.dtype, a.op);
    else reduce_pair(mine.data, theirs.data, mine.data, mine.count, mine.dtype, a.op);
  }
  if (r + p < n) c.isend_internal(mine, r + p, a.tag)->wait(c.timeout());
}

// `auto`: allreduce on 2 ranks up to COMM_RD_MAX_BYTES: one exchange (64 KiB measured,
// bench/compare.sh; at 4 ranks on 2 cores it loses to the tree, selector.h).
extern const Algorithm recursive_doubling_allreduce;
const Algorithm recursive_doubling_allreduce{
    "recursive_doubling", CollKind::allreduce, run,
    [](const AutoInput& in) { return in.world == 2 && in.bytes <= in.max_bytes; },
    {"COMM_RD_MAX_BYTES", 64 * 1024,
     "auto selector: on 2 ranks, allreduce messages up to this many bytes use recursive doubling (one exchange)"}};

}  // namespace dpt::algo
