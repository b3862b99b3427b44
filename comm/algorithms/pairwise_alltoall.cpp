// Pairwise-exchange alltoall: in step s (1..n-1) rank r sends its slot for rank r+s and
// receives from rank r-s, so each step every rank has exactly one send and one receive
// in flight and no link is oversubscribed.
//   slot i: elements [i*count, (i+1)*count); send slot i goes to rank i, recv slot i
//   comes from rank i. In place (send == recv) is not supported: it would overwrite
//   slots before they are sent.
#include <cstring>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

static void run(Communicator& c, const CollArgs& a) {
  const int n = c.size(), r = c.rank();
  const size_t count = a.recv.count / size_t(n);  // elements per slot
  if (count == 0) return;
  std::memcpy(a.recv.slice(size_t(r) * count, count).data, a.send.slice(size_t(r) * count, count).data,
              count * dtype_size(a.recv.dtype));
  for (int s = 1; s < n; ++s) {
    const int to = mod(r + s, n), from = mod(r - s, n);
    WorkPtr rw = c.irecv_internal(a.recv.slice(size_t(from) * count, count), from, a.tag);
    WorkPtr sw = c.isend_internal(a.send.slice(size_t(to) * count, count), to, a.tag);
    wait_all({rw, sw}, c.timeout());
  }
}

// `auto`: always (alltoall has no other algorithm here).
extern const Algorithm pairwise_alltoall;
const Algorithm pairwise_alltoall{"pairwise", CollKind::alltoall, run, always};

}  // namespace dpt::algo
