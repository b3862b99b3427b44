#pragma once
// The mpi backend: Communicator over an MPI communicator. User point-to-point, the
// algorithms' point-to-point and native collectives each run on their own duplicate
// of the communicator, so their messages can never match each other's. Every call is
// non-blocking underneath (MPI_I*) and waited on by polling with a deadline, which is
// what turns a stuck peer into a TimeoutError instead of a hang.
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace dpt {

// Creates a communicator over MPI_COMM_WORLD (initializing MPI if needed).
std::unique_ptr<Communicator> create_mpi_communicator(CommOptions options);
// A communicator over some ranks of MPI_COMM_WORLD, in the order given; collective over
// those ranks only (the others need not call it). `tag` tells apart groups being made
// at the same time; it must be the same on every member.
std::unique_ptr<Communicator> create_mpi_group_communicator(const std::vector<int>& world_ranks, int tag,
                                                           CommOptions options);

}  // namespace dpt
