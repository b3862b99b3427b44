#include "backends/mpi/mpi_work.h"

#include <chrono>
#include <thread>

#include "backends/mpi/mpi_runtime.h"

namespace dpt {

void mpi_wait(MPI_Request& req, const ErrorContext& ctx, Millis timeout, const std::atomic<bool>* aborted) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  for (long spins = 0;; ++spins) {
    int flag = 0;
    // (status.MPI_ERROR is only defined for multi-request completions: the return code
    // carries the error here, since the communicators use MPI_ERRORS_RETURN.)
    int rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) throw CommError(ctx, "MPI error: " + mpi::error_string(rc));
    if (flag) return;
    if (aborted && aborted->load()) throw AbortedError(ctx, "communicator was aborted");
    if ((spins & 255) == 0 && Clock::now() > deadline)
      throw TimeoutError(ctx, "timed out after " + std::to_string(timeout.count()) +
                                  " ms (is a peer stuck or dead, or did the ranks issue different collectives?)");
    // Spin briefly for latency, then give the core away: ranks often outnumber cores.
    if (spins > 2000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    else if (spins > 200) std::this_thread::yield();
  }
}

MpiWork::~MpiWork() {
  if (!done_ && req_ != MPI_REQUEST_NULL && mpi::is_initialized()) {
    // An abandoned request (its wait failed): cancel it so MPI releases the buffer.
    MPI_Cancel(&req_);
    MPI_Request_free(&req_);
  }
}

bool MpiWork::test() {
  if (done_) return true;
  int flag = 0;
  int rc = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) throw CommError(ctx_, "MPI error: " + mpi::error_string(rc));
  done_ = flag != 0;
  return done_;
}

void MpiWork::wait(Millis timeout) {
  if (done_) return;
  mpi_wait(req_, ctx_, timeout, aborted_);
  done_ = true;
}

}  // namespace dpt
