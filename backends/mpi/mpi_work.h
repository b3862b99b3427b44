#pragma once
// Work over an MPI_Request: test() is MPI_Test; wait() polls MPI_Test until done or
// the deadline, yielding the core when nothing moves (ranks often outnumber cores).
#include <mpi.h>

#include <atomic>

#include "comm/work.h"

namespace dpt {

class MpiWork : public Work {
 public:
  MpiWork(MPI_Request req, ErrorContext ctx, const std::atomic<bool>* aborted)
      : req_(req), ctx_(std::move(ctx)), aborted_(aborted) {}
  ~MpiWork() override;
  bool test() override;
  void wait(Millis timeout) override;

 private:
  MPI_Request req_;
  ErrorContext ctx_;
  const std::atomic<bool>* aborted_;
  bool done_ = false;
};

// Polls `req` until it completes; throws TimeoutError / CommError with `ctx`.
void mpi_wait(MPI_Request& req, const ErrorContext& ctx, Millis timeout, const std::atomic<bool>* aborted);

}  // namespace dpt
