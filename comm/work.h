#pragma once
// Work: the handle of an operation in flight. wait() with a timeout either returns
// (done), rethrows the operation's own error, or throws TimeoutError: it never hangs.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include "comm/error.h"

namespace dpt {

using Millis = std::chrono::milliseconds;

class Work {
 public:
  virtual ~Work() = default;
  // True once complete; rethrows the operation's error if it failed.
  virtual bool test() = 0;
  // Blocks until complete, rethrowing its error; TimeoutError after `timeout`.
  virtual void wait(Millis timeout) = 0;
  // Waits with the timeout of the communicator that issued the operation.
  void wait() { wait(default_timeout_); }
  void set_default_timeout(Millis t) { default_timeout_ = t; }

 protected:
  Millis default_timeout_{std::chrono::minutes(5)};
};
using WorkPtr = std::shared_ptr<Work>;

// Completion set by another thread (a communicator's worker or a transport thread).
class PromiseWork : public Work {
 public:
  explicit PromiseWork(ErrorContext ctx) : ctx_(std::move(ctx)) {}
  void complete();
  void fail(std::exception_ptr e);
  bool test() override;
  void wait(Millis timeout) override;
  bool done() const;
  // Sleeps until done or `timeout`; true when done. Neither rethrows nor throws.
  bool wait_until_done(Millis timeout);
  const ErrorContext& context() const { return ctx_; }
  // Called once, on the completing thread, before waiters are released (or at once
  // if the work already finished). Each call adds one; they run in the order given.
  void on_finish(std::function<void()> f);

 protected:
  [[noreturn]] void throw_timeout(Millis waited) const;
  void rethrow_if_failed() const;

 private:
  void finish(std::exception_ptr e);
  ErrorContext ctx_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool finishing_ = false;
  std::exception_ptr error_;
  std::function<void()> on_finish_;
};

// An operation that finished (or failed) at issue time.
class ReadyWork : public Work {
 public:
  explicit ReadyWork(std::exception_ptr e = nullptr) : error_(e) {}
  bool test() override;
  void wait(Millis) override { test(); }

 private:
  std::exception_ptr error_;
};

// Waits for all, in order; the first error is rethrown after every wait was attempted
// within the deadline, so no operation is left referencing a buffer silently.
void wait_all(std::initializer_list<WorkPtr> works, Millis timeout);

}  // namespace dpt
