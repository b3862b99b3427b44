#pragma once
// How big each rank's buffers are for one benchmark row, following nccl-tests:
//   size  - bytes of the largest buffer a rank holds (the full vector for allreduce,
//           the send side for reduce_scatter, the recv side for allgather);
//   piece - elements per rank's share ("count" column): the whole vector for
//           allreduce/broadcast/reduce, the per-rank block for reduce_scatter,
//           allgather and alltoall (the requested size is rounded down to n pieces).
//   busbw factor - nccl-tests' bus bandwidth factor: allreduce 2(n-1)/n;
//           reduce_scatter, allgather, alltoall (n-1)/n; broadcast, reduce 1.
#include <cstddef>

#include "comm/communicator.h"

namespace dpt::bench {

struct Layout {
  size_t send_count = 0;
  size_t recv_count = 0;
  size_t piece = 0;       // the "count" column
  size_t size_bytes = 0;  // the "size" column
};

Layout layout_for(CollKind k, size_t requested_bytes, DType t, int n);
double busbw_factor(CollKind k, int n);

}  // namespace dpt::bench
