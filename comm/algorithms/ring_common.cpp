#include "comm/algorithms/ring_common.h"

#include <cstring>
#include <memory>

#include "comm/reduce_kernels.h"

namespace dpt::algo {

char* receive_window(size_t bytes) {
  // Kept per thread (collectives run on their communicator's worker thread) and never
  // zeroed: a fresh zeroed buffer per call costs a page fault per 4 KiB and a memset,
  // as much as a large part of the transfer. Bounded by kRingRecvWindowBytes.
  thread_local std::unique_ptr<char[]> buf;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    buf.reset(new char[bytes]);
    capacity = bytes;
  }
  return buf.get();
}

void copy_if_distinct(const Buffer& dst, const Buffer& src) {
  if (dst.data != src.data && src.bytes() > 0) std::memmove(dst.data, src.data, src.bytes());
}

void ring_reduce_scatter_phase(Communicator& c, const CollArgs& a, const Buffer& data,
                               const ChunkLayout& layout, int shift, const std::function<void()>& on_all_posted) {
  const int n = c.size(), r = c.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  const size_t esize = dtype_size(data.dtype);
  const size_t seg_elems = std::max<size_t>(1, c.options().thresholds.segment_bytes / esize);

  // The receive stream: segment k of chunk (r + shift - s - 1) for steps s = 0..n-2.
  struct Seg {
    size_t offset, count;
  };
  auto segments_of = [&](int chunk, std::vector<Seg>& out) {
    const size_t off = layout.offset(chunk), len = layout.len(chunk);
    for (size_t b = 0; b < len; b += seg_elems) out.push_back(Seg{off + b, std::min(seg_elems, len - b)});
  };
  std::vector<Seg> recvs, sends;
  segments_of(mod(r + shift, n), sends);  // step 0 sends this rank's own chunk
  const size_t first_sends = sends.size();
  for (int s = 0; s < n - 1; ++s) segments_of(mod(r + shift - s - 1, n), recvs);
  // Step s+1 sends what step s received and reduced: receive g is send first_sends + g,
  // for every receive but those of the last step.
  const size_t forwarded = recvs.size() - (layout.len(mod(r + shift - n + 1, n)) + seg_elems - 1) / seg_elems;

  const size_t max_seg = std::min(seg_elems, layout.len(0));
  const size_t window = std::max<size_t>(2, kRingRecvWindowBytes / std::max<size_t>(1, max_seg * esize));
  const size_t slots_n = std::min(window, std::max<size_t>(1, recvs.size()));
  char* scratch = receive_window(slots_n * max_seg * esize);
  auto slot = [&](size_t g) { return scratch + (g % slots_n) * max_seg * esize; };

  std::vector<WorkPtr> send_works;
  send_works.reserve(first_sends + forwarded);
  auto post_send = [&](const Seg& sg) { send_works.push_back(c.isend_internal(data.slice(sg.offset, sg.count), right, a.tag)); };
  for (size_t h = 0; h < first_sends; ++h) post_send(sends[h]);

  std::vector<WorkPtr> recv_works(recvs.size());
  size_t posted = 0;
  bool announced = false;
  auto post_recvs = [&](size_t done) {
    for (; posted < recvs.size() && posted < done + slots_n; ++posted)
      recv_works[posted] = c.irecv_internal(Buffer{slot(posted), recvs[posted].count, data.dtype, data.device}, left, a.tag);
    if (posted == recvs.size() && !announced) {
      announced = true;
      if (on_all_posted) on_all_posted();
    }
  };
  post_recvs(0);  // also announces on_all_posted when there is nothing to receive
  for (size_t g = 0; g < recvs.size(); ++g) {
    post_recvs(g);
    recv_works[g]->wait(c.timeout());
    recv_works[g].reset();
    reduce_into(data.slice(recvs[g].offset, 0).data, slot(g), recvs[g].count, data.dtype, a.op);
    if (g < forwarded) post_send(recvs[g]);
  }
  for (auto& w : send_works) w->wait(c.timeout());
}

std::vector<WorkPtr> post_allgather_recvs(Communicator& c, const CollArgs& a, const Buffer& data,
                                          const ChunkLayout& layout, int shift) {
  // Every step's receive goes to its own place in `data`: post them all at once, so the
  // left neighbour's chunks never arrive before their receive (and get buffered).
  const int n = c.size(), left = mod(c.rank() - 1, n);
  std::vector<WorkPtr> recvs(size_t(n - 1));
  for (int s = 0; s < n - 1; ++s) {
    const int chunk = mod(c.rank() + shift - s - 1, n);
    if (layout.len(chunk) > 0) recvs[size_t(s)] = c.irecv_internal(data.slice(layout.offset(chunk), layout.len(chunk)), left, a.tag);
  }
  return recvs;
}

void ring_allgather_phase(Communicator& c, const CollArgs& a, const Buffer& data,
                          const ChunkLayout& layout, int shift, std::vector<WorkPtr> recvs) {
  const int n = c.size(), r = c.rank();
  const int right = mod(r + 1, n);
  std::vector<WorkPtr> sends;
  for (int s = 0; s < n - 1; ++s) {
    // Step s sends what step s-1 received.
    if (s > 0 && recvs[size_t(s - 1)]) recvs[size_t(s - 1)]->wait(c.timeout());
    const int chunk = mod(r + shift - s, n);
    if (layout.len(chunk) > 0) sends.push_back(c.isend_internal(data.slice(layout.offset(chunk), layout.len(chunk)), right, a.tag));
  }
  if (n > 1 && recvs[size_t(n - 2)]) recvs[size_t(n - 2)]->wait(c.timeout());
  for (auto& w : sends) w->wait(c.timeout());
}

}  // namespace dpt::algo
