// Dissemination barrier: in round k (distance d = 2^k) rank r sends an empty token to
// r+d and waits for one from r-d. After ceil(log2 n) rounds every rank has heard,
// directly or transitively, from every other one, so none leaves before all arrived.
#include <cstdint>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

static void run(Communicator& c, const CollArgs& a) {
  const int n = c.size(), r = c.rank();
  uint8_t out = 1, in = 0;
  for (int d = 1; d < n; d <<= 1) {
    WorkPtr rw = c.irecv_internal(Buffer{&in, 1, DType::u8, {}}, mod(r - d, n), a.tag);
    WorkPtr sw = c.isend_internal(Buffer{&out, 1, DType::u8, {}}, mod(r + d, n), a.tag);
    wait_all({rw, sw}, c.timeout());
  }
}

// `auto`: always (barrier has no other algorithm here).
extern const Algorithm dissemination_barrier;
const Algorithm dissemination_barrier{"dissemination", CollKind::barrier, run, always};

}  // namespace dpt::algo
