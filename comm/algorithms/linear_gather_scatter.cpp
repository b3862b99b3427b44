// Linear gather and scatter: the root posts one receive (gather) or send (scatter) per
// rank, all at once, and waits for all. The root's link is the bottleneck whatever the
// algorithm, so a tree would add latency without saving bandwidth.
//   slot i: elements [i*count, (i+1)*count) of the root's big buffer belong to rank i.
#include <cstring>
#include <vector>

#include "comm/algorithms/registry.h"

namespace dpt::algo {

static void run_gather(Communicator& c, const CollArgs& a) {
  const size_t count = a.send.count;
  if (count == 0) return;
  if (c.rank() != a.root) {
    c.isend_internal(a.send, a.root, a.tag)->wait(c.timeout());
    return;
  }
  std::vector<WorkPtr> works;
  for (int i = 0; i < c.size(); ++i) {
    Buffer slot = a.recv.slice(size_t(i) * count, count);
    if (i == c.rank()) {
      if (slot.data != a.send.data) std::memcpy(slot.data, a.send.data, a.send.bytes());
    } else {
      works.push_back(c.irecv_internal(slot, i, a.tag));
    }
  }
  for (auto& w : works) w->wait(c.timeout());
}

static void run_scatter(Communicator& c, const CollArgs& a) {
  const size_t count = a.recv.count;
  if (count == 0) return;
  if (c.rank() != a.root) {
    c.irecv_internal(a.recv, a.root, a.tag)->wait(c.timeout());
    return;
  }
  std::vector<WorkPtr> works;
  for (int i = 0; i < c.size(); ++i) {
    Buffer slot = a.send.slice(size_t(i) * count, count);
    if (i == c.rank()) {
      if (slot.data != a.recv.data) std::memcpy(a.recv.data, slot.data, a.recv.bytes());
    } else {
      works.push_back(c.isend_internal(slot, i, a.tag));
    }
  }
  for (auto& w : works) w->wait(c.timeout());
}

// `auto`: always (gather and scatter have no other algorithm here).
extern const Algorithm linear_gather;
const Algorithm linear_gather{"linear", CollKind::gather, run_gather, always};
extern const Algorithm linear_scatter;
const Algorithm linear_scatter{"linear", CollKind::scatter, run_scatter, always};

}  // namespace dpt::algo
