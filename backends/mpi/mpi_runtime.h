#pragma once
// MPI's process-wide life cycle: initialized once with MPI_THREAD_MULTIPLE (the
// communicator's worker thread and the caller's thread both call MPI), errors set to
// return instead of abort, finalized at exit if we initialized it.
#include <string>

namespace dpt::mpi {

// Idempotent; throws std::runtime_error if MPI cannot give MPI_THREAD_MULTIPLE.
void ensure_initialized();
bool is_initialized();
// Text of an MPI error code.
std::string error_string(int code);
// Rank 0's string, on every rank of MPI_COMM_WORLD (bootstrap of other backends).
std::string broadcast_from_rank0(const std::string& value);
// For programs (never library code): end the whole MPI job after a fatal error so that
// no rank is left waiting in a collective. No-op when MPI is not initialized or its world
// is this process alone (the caller then exits with its own code).
void abort_job(int exit_code);

}  // namespace dpt::mpi
