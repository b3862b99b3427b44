#pragma once
// The project's collective algorithms, one per file in this folder, each written only
// on Communicator's point-to-point calls (isend_internal / irecv_internal) so that one
// implementation runs on every backend. They run on the communicator's worker thread
// and block until done; `a.tag` keeps one collective's messages apart from the next.
#include "comm/communicator.h"

namespace dpt::algo {

void ring_allreduce(Communicator& c, const CollArgs& a);
void tree_allreduce(Communicator& c, const CollArgs& a);
void recursive_doubling_allreduce(Communicator& c, const CollArgs& a);
void ring_reduce_scatter(Communicator& c, const CollArgs& a);
void ring_allgather(Communicator& c, const CollArgs& a);
void tree_broadcast(Communicator& c, const CollArgs& a);
void tree_reduce(Communicator& c, const CollArgs& a);
void linear_gather(Communicator& c, const CollArgs& a);
void linear_scatter(Communicator& c, const CollArgs& a);
void pairwise_alltoall(Communicator& c, const CollArgs& a);
void dissemination_barrier(Communicator& c, const CollArgs& a);

}  // namespace dpt::algo
