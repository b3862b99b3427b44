// Ring allreduce: a ring reduce-scatter followed by a ring allgather.
//   Each rank sends and receives 2(n-1)/n of the buffer in total, the bandwidth optimum,
//   in 2(n-1) steps, so it wins for large messages and loses to the tree for small ones.
//   Terms (ring, chunk, segment, step) are defined in ring_common.h. The reduce-scatter
//   phase is pipelined by segment; every element is reduced exactly once, in the same
//   order on every rank's behalf, so all ranks end with bit-identical results.
#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

static void run(Communicator& c, const CollArgs& a) {
  copy_if_distinct(a.recv, a.send);
  if (c.size() == 1 || a.recv.count == 0) return;
  ChunkLayout layout{a.recv.count, c.size()};
  // shift 0: after reduce-scatter rank r owns chunk r+1, which it then passes on first.
  // The allgather's receives are posted as soon as the reduce-scatter's all are: a
  // neighbour that finishes first then finds them posted (its whole chunk would
  // otherwise arrive unexpected, be buffered and copied twice).
  std::vector<WorkPtr> gather_recvs;
  ring_reduce_scatter_phase(c, a, a.recv, layout, 0,
                            [&] { gather_recvs = post_allgather_recvs(c, a, a.recv, layout, 1); });
  ring_allgather_phase(c, a, a.recv, layout, 1, std::move(gather_recvs));
}

// `auto`: allreduce beyond the tree's range (the list's last allreduce: always).
extern const Algorithm ring_allreduce;
const Algorithm ring_allreduce{"ring", CollKind::allreduce, run, always};

}  // namespace dpt::algo
