#include "comm/dispatch/collective_queue.h"

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
  if (on_numbered_) on_numbered_(args);
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
    if (wake) ++stats_.worker_notifies;
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
  ++stats_.by_caller;
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

QueueStats CollectiveQueue::stats() {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void CollectiveQueue::run_front(std::unique_lock<std::mutex>& lk, uint64_t& ran) {
  Task task = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  ++ran;
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
      run_front(lk, stats_.by_driver);
      continue;
    }
    // Another thread runs a task (the worker, a blocking caller or another driver), or
    // the front task must run on the worker: wait for it to end.
    if (Clock::now() >= deadline) break;
    drivers_cv_.wait_until(lk, deadline);
  }
  // Tasks left behind that nobody drives now: the parked worker finds them within
  // kMaxPoll, then gives a caller the grace. Not woken here: when a caller waits its
  // Works one by one that would be a wake-up per wait.
  if (--drivers_ == 0 && !queue_.empty()) grace_until_ = Clock::now() + kGrace;
}

void CollectiveQueue::worker_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    const bool empty = queue_.empty();
    if (empty && stopping_ && !busy_) return;  // drained
    const bool for_callers = !empty && waiters_run_ && !stopping_ && runs_inline_(queue_.front().args);
    const auto now = Clock::now();
    if (!empty && !busy_ && (!for_callers || (drivers_ == 0 && now >= grace_until_))) {
      run_front(lk, stats_.by_worker);
      continue;
    }
    if (stopping_) {
      worker_cv_.wait_for(lk, kMaxPoll);  // a caller's task is still running
      continue;
    }
    if (!empty && !busy_ && drivers_ == 0) {
      // A caller may still come to wait and run the front task itself: give it the grace.
      worker_cv_.wait_until(lk, grace_until_);
      if (!queue_.empty()) ++stats_.worker_wakeups;
      continue;
    }
    // Nothing queued, or a driver or a blocking caller is running the queue: sleep until
    // the next push (nothing queued) or, with tasks queued, kMaxPoll at a time. No
    // shorter polls: on a machine with as many busy threads as cores every wake-up of
    // this thread preempts one that computes or runs a collective its peers wait on
    // (bench/queue_overhead.cpp counts wake-ups and context switches per collective).
    if (empty) {
      worker_idle_ = true;
      worker_cv_.wait(lk);
      worker_idle_ = false;
    } else {
      worker_cv_.wait_for(lk, kMaxPoll);
    }
    if (!queue_.empty()) ++stats_.worker_wakeups;
  }
}

}  // namespace dpt
