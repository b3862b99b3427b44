#include "comm/algorithms/ring_common.h"

#include <cstring>

#include "comm/reduce_kernels.h"

namespace dpt::algo {

void copy_if_distinct(const Buffer& dst, const Buffer& src) {
  if (dst.data != src.data && src.bytes() > 0) std::memmove(dst.data, src.data, src.bytes());
}

void ring_reduce_scatter_phase(Communicator& c, const CollArgs& a, const Buffer& data,
                               const ChunkLayout& layout, int shift) {
  const int n = c.size(), r = c.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  const size_t esize = dtype_size(data.dtype);
  const size_t seg_elems = std::max<size_t>(1, c.options().thresholds.segment_bytes / esize);
  // Two receive slots: segment k+1 arrives in one while segment k is reduced from the other.
  const size_t max_seg = std::min(seg_elems, layout.len(0));
  std::vector<char> slots(2 * max_seg * esize);
  auto slot = [&](size_t k) { return Buffer{slots.data() + (k % 2) * max_seg * esize, 0, data.dtype, data.device}; };

  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = mod(r + shift - s, n), recv_chunk = mod(r + shift - s - 1, n);
    const Buffer out = data.slice(layout.offset(send_chunk), layout.len(send_chunk));
    const Buffer in = data.slice(layout.offset(recv_chunk), layout.len(recv_chunk));
    const size_t nseg_out = (out.count + seg_elems - 1) / seg_elems;
    const size_t nseg_in = (in.count + seg_elems - 1) / seg_elems;

    std::vector<WorkPtr> sends;
    sends.reserve(nseg_out);
    for (size_t k = 0; k < nseg_out; ++k) {
      size_t b = k * seg_elems;
      sends.push_back(c.isend_internal(out.slice(b, std::min(seg_elems, out.count - b)), right, a.tag));
    }
    auto post_recv = [&](size_t k) {
      size_t b = k * seg_elems;
      Buffer dst = slot(k);
      dst.count = std::min(seg_elems, in.count - b);
      return c.irecv_internal(dst, left, a.tag);
    };
    WorkPtr pending = nseg_in > 0 ? post_recv(0) : nullptr;
    for (size_t k = 0; k < nseg_in; ++k) {
      WorkPtr next = (k + 1 < nseg_in) ? post_recv(k + 1) : nullptr;
      pending->wait(c.timeout());
      size_t b = k * seg_elems;
      reduce_into(in.slice(b, 0).data, slot(k).data, std::min(seg_elems, in.count - b), data.dtype,
                  a.op);
      pending = next;
    }
    for (auto& w : sends) w->wait(c.timeout());
  }
}

void ring_allgather_phase(Communicator& c, const CollArgs& a, const Buffer& data,
                          const ChunkLayout& layout, int shift) {
  const int n = c.size(), r = c.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = mod(r + shift - s, n), recv_chunk = mod(r + shift - s - 1, n);
    WorkPtr rw, sw;
    if (layout.len(recv_chunk) > 0)
      rw = c.irecv_internal(data.slice(layout.offset(recv_chunk), layout.len(recv_chunk)), left, a.tag);
    if (layout.len(send_chunk) > 0)
      sw = c.isend_internal(data.slice(layout.offset(send_chunk), layout.len(send_chunk)), right, a.tag);
    wait_all({rw, sw}, c.timeout());
  }
}

}  // namespace dpt::algo
