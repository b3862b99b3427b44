#pragma once
// Shared pieces of the ring algorithms.
//   ring:    rank r sends to right = r+1 and receives from left = r-1 (mod n).
//   chunk:   the buffer is cut into n chunks, chunk i = elements [offset(i), offset(i)+len(i));
//            lengths differ by at most one element, so any count works (even count < n).
//   segment: a chunk is sent as segments of at most `segment_bytes`, so the reduction
//            of one segment overlaps the transfer of the next.
//   step:    one of the n-1 rounds of a phase; in each, every rank sends one chunk and
//            receives one.
//   stream:  the reduce-scatter phase runs as one stream of segments rather than step by
//            step: a segment received and reduced at step s is sent on (step s+1) at
//            once, so successive steps overlap. Receives are posted up to a window
//            (kRingRecvWindowBytes of scratch) ahead of the one being reduced, so the
//            sender's segments find their receive already posted (no unexpected-message
//            buffering and its extra copy); sends are posted as soon as they are ready.
#include <cstddef>
#include <functional>
#include <vector>

#include "comm/communicator.h"

namespace dpt::algo {

struct ChunkLayout {
  size_t count;  // elements in the whole buffer
  int n;         // number of chunks (= ranks)
  size_t offset(int i) const { return (count / n) * i + std::min<size_t>(i, count % n); }
  size_t len(int i) const { return count / n + (size_t(i) < count % n ? 1 : 0); }
};

inline int mod(int x, int n) { return ((x % n) + n) % n; }

// Scratch for receives posted ahead in the reduce-scatter phase (at least two segments).
inline constexpr size_t kRingRecvWindowBytes = size_t(32) << 20;

// Reduce-scatter phase in place over `data` (all n chunks, laid out by `layout`). At
// step s rank r sends chunk (r + shift - s) and receives, then reduces, chunk
// (r + shift - s - 1). Afterwards rank r holds the fully reduced chunk
// (r + shift - n + 1) mod n.
// `on_all_posted`, if set, runs once every receive of the phase is posted (ring
// allreduce posts its allgather receives there, so they queue behind these in order).
void ring_reduce_scatter_phase(Communicator& c, const CollArgs& a, const Buffer& data,
                               const ChunkLayout& layout, int shift,
                               const std::function<void()>& on_all_posted = {});

// Allgather phase in place over `data`: rank r starts owning chunk (r + shift) and at
// step s sends chunk (r + shift - s) and receives chunk (r + shift - s - 1).
// Its receives are posted by post_allgather_recvs (possibly long before, see above).
std::vector<WorkPtr> post_allgather_recvs(Communicator& c, const CollArgs& a, const Buffer& data,
                                          const ChunkLayout& layout, int shift);
void ring_allgather_phase(Communicator& c, const CollArgs& a, const Buffer& data,
                          const ChunkLayout& layout, int shift, std::vector<WorkPtr> recvs);

// The reduce-scatter phase's receive slots: this thread's reusable, uninitialised buffer
// of at least `bytes` (valid until the next call on this thread).
char* receive_window(size_t bytes);

// Copies src to dst when they differ (out-of-place calls).
void copy_if_distinct(const Buffer& dst, const Buffer& src);

}  // namespace dpt::algo
