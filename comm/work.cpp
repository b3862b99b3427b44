#include "comm/work.h"

namespace dpt {

// The on_finish callback runs before waiters are released, so whatever it records
// (e.g. a completion time) is visible to a thread returning from wait().
void PromiseWork::finish(std::exception_ptr e) {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> lk(mu_);
    finishing_ = true;
    f = std::move(on_finish_);
  }
  if (f) f();
  {
    std::lock_guard<std::mutex> lk(mu_);
    error_ = e;
    done_ = true;
  }
  cv_.notify_all();
}

void PromiseWork::complete() { finish(nullptr); }

void PromiseWork::fail(std::exception_ptr e) { finish(e); }

void PromiseWork::on_finish(std::function<void()> f) {
  std::unique_lock<std::mutex> lk(mu_);
  if (finishing_ || done_) {
    lk.unlock();
    f();
    return;
  }
  // Several callers may each want to know (a timer and the flight recorder): run all.
  if (on_finish_) on_finish_ = [first = std::move(on_finish_), then = std::move(f)] { first(); then(); };
  else on_finish_ = std::move(f);
}

bool PromiseWork::done() const {
  std::lock_guard<std::mutex> lk(mu_);
  return done_;
}

bool PromiseWork::wait_until_done(Millis timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_for(lk, timeout, [&] { return done_; });
}

bool PromiseWork::test() {
  std::lock_guard<std::mutex> lk(mu_);
  if (done_ && error_) std::rethrow_exception(error_);
  return done_;
}

void PromiseWork::wait(Millis timeout) {
  if (!wait_until_done(timeout)) throw_timeout(timeout);
  rethrow_if_failed();
}

void PromiseWork::throw_timeout(Millis waited) const {
  throw TimeoutError(ctx_, "timed out after " + std::to_string(waited.count()) +
                               " ms (is a peer stuck or dead, or did the ranks issue "
                               "different collectives?)");
}

void PromiseWork::rethrow_if_failed() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (error_) std::rethrow_exception(error_);
}

bool ReadyWork::test() {
  if (error_) std::rethrow_exception(error_);
  return true;
}

void wait_all(std::initializer_list<WorkPtr> works, Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::exception_ptr first;
  for (const auto& w : works) {
    if (!w) continue;
    try {
      auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
      w->wait(std::max(left, Millis(0)));
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace dpt
