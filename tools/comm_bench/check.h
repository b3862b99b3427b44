#pragma once
// Exact result checking for comm_bench -c 1. Inputs are small integers chosen per
// (rank, element, op) so that every reduction is exact in every dtype, f16 and bf16
// included, and results are compared byte for byte (as tests/support/typed_values.h
// does for the test suite; the bench keeps its own copy so tools/ needs nothing of tests/).
//   input(r, i) - element i of rank r's send buffer (i counts over the whole buffer).
//   expected    - what rank `me` must hold afterwards, per collective:
//     allreduce / reduce (root): recv[i] = op over q of input(q, i)
//     broadcast:                 buf[i]  = input(root, i)
//     reduce_scatter:            recv[j] = op over q of input(q, me*piece + j)
//     allgather:                 recv[q*piece + j] = input(q, j)
//     alltoall:                  recv[q*piece + j] = input(q, me*piece + j)
#include <cstddef>
#include <vector>

#include "comm/communicator.h"
#include "tools/comm_bench/layout.h"

namespace dpt::bench {

// Fills `count` elements of rank r's input, starting at element `first` of its buffer.
void fill_input(void* dst, size_t first, size_t count, DType t, int r, ReduceOp op);
// Number of recv elements on rank `me` that differ from the exact expected values.
// Returns 0 on ranks that hold no result (reduce on a non-root).
size_t count_wrong(CollKind k, const void* recv, const Layout& l, DType t, ReduceOp op, int me, int n, int root);

}  // namespace dpt::bench
