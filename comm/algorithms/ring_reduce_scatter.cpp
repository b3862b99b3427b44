// Ring reduce-scatter: rank r ends with chunk r of the element-wise reduction of all
// ranks' send buffers (send holds n chunks of recv.count elements each).
//   Terms (ring, chunk, segment, step) are defined in ring_common.h. The ring runs in a
//   scratch copy of send unless the call is in place (recv is send's own chunk), in
//   which case send itself is the scratch, as NCCL allows.
#include <cstring>
#include <memory>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

static void run(Communicator& c, const CollArgs& a) {
  const int n = c.size(), r = c.rank();
  const size_t count = a.recv.count;
  if (count == 0) return;
  const size_t esize = dtype_size(a.recv.dtype);
  const bool in_place = static_cast<char*>(a.send.data) + r * count * esize == a.recv.data;
  std::unique_ptr<char[]> scratch;  // uninitialised: the copy below fills it
  Buffer work = a.send;
  if (!in_place && n > 1) {
    scratch.reset(new char[a.send.bytes()]);
    std::memcpy(scratch.get(), a.send.data, a.send.bytes());
    work.data = scratch.get();
  }
  if (n > 1) {
    ChunkLayout layout{count * n, n};  // equal chunks of `count`
    // shift -1: at the end rank r owns chunk r.
    ring_reduce_scatter_phase(c, a, work, layout, -1);
  }
  Buffer mine = work.slice(size_t(r) * count, count);
  if (mine.data != a.recv.data) std::memcpy(a.recv.data, mine.data, count * esize);
}

// `auto`: always (reduce-scatter has no other algorithm here).
extern const Algorithm ring_reduce_scatter;
const Algorithm ring_reduce_scatter{"ring", CollKind::reduce_scatter, run, always};

}  // namespace dpt::algo
