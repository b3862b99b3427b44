#pragma once
// One exception family for everything that goes wrong in communication. Every message
// names the rank, the backend and the operation, and where there is one, the peer and
// the operation's sequence number, so a user of a 64-rank job knows whom to blame.
#include <cstdint>
#include <stdexcept>
#include <string>

namespace dpt {

struct ErrorContext {
  int rank = -1;
  int world_size = -1;
  std::string backend;  // "mpi", "tcp", ...
  std::string op;       // "allreduce", "recv", "rendezvous", ...
  int peer = -1;        // -1: no single peer involved
  int64_t seq = -1;     // collective sequence number on its communicator, -1: none
};

// "[rank 1/4 tcp] allreduce #17 (peer 2): <detail>"
std::string format_error(const ErrorContext& ctx, const std::string& detail);

class CommError : public std::runtime_error {
 public:
  CommError(ErrorContext ctx, std::string detail)
      : std::runtime_error(format_error(ctx, detail)), ctx_(std::move(ctx)), detail_(std::move(detail)) {}
  const ErrorContext& context() const { return ctx_; }
  const std::string& detail() const { return detail_; }

 private:
  ErrorContext ctx_;
  std::string detail_;
};

// A wait ran past its timeout (stuck peer, or ranks issued different collectives).
class TimeoutError : public CommError { using CommError::CommError; };
// A peer closed its connection or died.
class PeerError : public CommError { using CommError::CommError; };
// Ranks disagree about an operation (sizes, dtypes, order).
class MismatchError : public CommError { using CommError::CommError; };
// The caller passed something invalid (bad rank, bad tag, sizes that do not fit).
class UsageError : public CommError { using CommError::CommError; };
// The communicator was aborted, or an earlier error left it unusable.
class AbortedError : public CommError { using CommError::CommError; };
// A backend that is not compiled into this build (e.g. nccl without CUDA).
class NotBuiltError : public std::runtime_error { using std::runtime_error::runtime_error; };

}  // namespace dpt
