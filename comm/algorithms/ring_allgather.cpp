// Ring allgather: every rank ends with all ranks' send buffers, rank i's at slot i of
// recv. Each step passes the chunk received last step on to the right, so every link
// carries (n-1)/n of the result: bandwidth-optimal. Terms in ring_common.h.
#include <cstring>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

static void run(Communicator& c, const CollArgs& a) {
  const size_t count = a.send.count;
  Buffer mine = a.recv.slice(size_t(c.rank()) * count, count);
  if (mine.data != a.send.data && count > 0) std::memcpy(mine.data, a.send.data, a.send.bytes());
  if (c.size() == 1 || count == 0) return;
  ChunkLayout layout{count * c.size(), c.size()};
  ring_allgather_phase(c, a, a.recv, layout, 0, post_allgather_recvs(c, a, a.recv, layout, 0));
}

// `auto`: always (allgather has no other algorithm here).
extern const Algorithm ring_allgather;
const Algorithm ring_allgather{"ring", CollKind::allgather, run, always};

}  // namespace dpt::algo
