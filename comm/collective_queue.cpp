#include "comm/collective_queue.h"

#include <algorithm>

namespace dpt {

void QueuedWork::wait(Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!done()) queue_->drive_until(*this, deadline);
  const auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
  if (!wait_until_done(std::max(left, Millis(0)))) throw_timeout(timeout);
  rethrow_if_failed();
}

CollectiveQueue::CollectiveQueue(Runner run, InlineTest runs_inline, bool waiters_run)
    : run_(std::move(run)), runs_inline_(std::move(runs_inline)), waiters_run_(waiters_run) {
  worker_ = std::thread([this] { worker_loop(); });
}

CollectiveQueue::~CollectiveQueue() { stop(); }

void CollectiveQueue::number(CollArgs& args) {
  args.seq = next_seq_++;
  // Tags above the user range: one per collective, so a late message of one collective
  // can never be matched by the next one.
  args.tag = Communicator::kMaxUserTag + 1 + (args.seq % (int64_t{1} << 30));
}

WorkPtr CollectiveQueue::push(CollArgs args, const ErrorContext& ctx, Millis wait_timeout) {
  auto work = std::make_shared<QueuedWork>(ctx, this);
  work->set_default_timeout(wait_timeout);
  bool wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) throw AbortedError(ctx, "communicator is shutting down");
    number(args);
    queue_.push_back(Task{args, work});
    if (waiters_run_) grace_until_ = Clock::now() + kGrace;
    wake = worker_idle_;
    worker_idle_ = false;  // one wake-up per idle period, not one per push
  }
  if (wake) worker_cv_.notify_one();
  return work;
}

bool CollectiveQueue::try_run_here(CollArgs& args, std::exception_ptr& err) {
  std::unique_lock<std::mutex> lk(mu_);
  if (stopping_ || busy_ || !queue_.empty() || !runs_inline_(args)) return false;
  // Idle and nothing queued: this call is next in issue order, so it runs here.
  busy_ = true;
  number(args);
  lk.unlock();
  err = run_(args);
  lk.lock();
  busy_ = false;
  // Pushed meanwhile by another thread: let a driver or the worker go on (rare; a
  // blocking caller alone never wakes anyone).
  if (!queue_.empty()) {
    if (drivers_ > 0) drivers_cv_.notify_all();
    else worker_cv_.notify_one();
  }
  return true;
}

void CollectiveQueue::fail_queued(const std::function<std::exception_ptr(const CollArgs&)>& error_for) {
  std::deque<Task> pending;
  {
    std::lock_guard<std::mutex> lk(mu_);
    pending.swap(queue_);
  }
  for (auto& t : pending) t.work->fail(error_for(t.args));
  std::lock_guard<std::mutex> lk(mu_);
  drivers_cv_.notify_all();
}

void CollectiveQueue::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
  }
  worker_cv_.notify_all();
  drivers_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void CollectiveQueue::run_front(std::unique_lock<std::mutex>& lk) {
  Task task = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  lk.unlock();
  std::exception_ptr err = run_(task.args);
  if (err) task.work->fail(err);
  else task.work->complete();
  lk.lock();
  busy_ = false;
  if (drivers_ > 0) drivers_cv_.notify_all();  // a driver's own task may be the one that ended
}

void CollectiveQueue::drive_until(const PromiseWork& w, Clock::time_point deadline) {
  if (!waiters_run_) return;
  std::unique_lock<std::mutex> lk(mu_);
  ++drivers_;
  while (!w.done()) {
    if (!busy_ && !queue_.empty() && runs_inline_(queue_.front().args)) {
      run_front(lk);
      continue;
    }
    // Another thread runs a task (the worker, a blocking caller or another driver), or
    // the front task must run on the worker: wait for it to end.
    if (Clock::now() >= deadline) break;
    drivers_cv_.wait_until(lk, deadline);
  }
  if (--drivers_ == 0 && !queue_.empty()) grace_until_ = Clock::now() + kGrace;
}

void CollectiveQueue::worker_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  std::chrono::microseconds poll = kGrace;
  for (;;) {
    if (queue_.empty()) {
      if (stopping_ && !busy_) return;  // drained
      if (!stopping_) {
        worker_idle_ = true;
        worker_cv_.wait(lk);
        worker_idle_ = false;
      } else {
        worker_cv_.wait_for(lk, kMaxPoll);  // a caller's task is still running
      }
      poll = kGrace;
      continue;
    }
    const bool for_callers = waiters_run_ && !stopping_ && runs_inline_(queue_.front().args);
    const auto now = Clock::now();
    if (!busy_ && (!for_callers || (drivers_ == 0 && now >= grace_until_))) {
      run_front(lk);
      poll = kGrace;
      continue;
    }
    // A task is running elsewhere, or a caller may still take the front one: look again
    // after the grace, or after a poll that grows while nothing changes.
    auto until = now + poll;
    if (!busy_ && drivers_ == 0) until = std::min(until, grace_until_);
    worker_cv_.wait_until(lk, until);
    poll = std::min(poll * 2, kMaxPoll);
  }
}

}  // namespace dpt
