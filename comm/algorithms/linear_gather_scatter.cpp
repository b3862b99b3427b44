// Linear gather and scatter: the root posts one receive (gather) or send (scatter) per
// rank, all at once, and waits for all. The root's link is the bottleneck whatever the
// algorithm, so a tree would add latency without saving bandwidth.
//   slot i: elements [i*count, (i+1)*count) of the root's big buffer belong to rank i.
#include <cstring>
#include <vector>

#include "comm/algorithms/algorithms.h"

namespace dpt::algo {

void linear_gather(Communicator& c, const CollArgs& a) {
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

void linear_scatter(Communicator& c, const CollArgs& a) {
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

}  // namespace dpt::algo
