#pragma once
// The collective queue of one communicator: collectives run one at a time, in issue
// order, on whichever thread is best placed to run them.
//
// Terms:
//   task       - one collective: its arguments (numbered here: seq, and the tag its
//                messages use) and its Work.
//   worker     - the communicator's own thread: it runs the tasks nobody waits for, so
//                an *_async collective progresses while its caller computes (DDP's
//                buckets during backward).
//   inline     - a task may run on a caller's thread when its buffers are on the host
//                and the backend allows it (Communicator::runs_on_caller; NCCL does not).
//   blocking caller - a plain (blocking) collective that finds the queue idle and empty
//                runs on its own thread (try_run_here): no thread hand-off at all.
//   driver     - a thread waiting on a queued task's Work. It runs the queue's front
//                tasks itself, in order, until its own is done, instead of sleeping
//                until the worker hands it the result: a batch of collectives issued and
//                then waited (comm_bench's default mode, DDP's last buckets) costs no
//                thread wake-up per collective. While a driver is registered the worker
//                leaves inline tasks to it.
//   grace      - the worker starts an inline task only once no driver is registered
//                and kGrace has passed since the last push or driver departure: a caller
//                about to wait runs the batch itself. A task nobody waits for therefore
//                starts at most kGrace late.
//   park       - while a driver or a blocking caller runs the queue, the worker sleeps
//                kMaxPoll at a time (until the next push when nothing is queued), so a
//                task a departing driver left behind starts at most kMaxPoll + grace
//                late. Shorter polls cost more than they save: on a machine with as
//                many busy threads as cores each wake-up preempts a rank that its peers
//                are waiting on (bench/queue_overhead.cpp counts wake-ups and context
//                switches per collective).
// With COMM_WAITERS_RUN=0 (CommOptions::waiters_run) the worker runs every queued task
// at once and waiters only sleep, as before drivers existed.
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "comm/communicator.h"

namespace dpt {

class CollectiveQueue;

// The Work of a queued collective: wait() drives the queue (see "driver").
class QueuedWork : public PromiseWork {
 public:
  QueuedWork(ErrorContext ctx, CollectiveQueue* queue) : PromiseWork(std::move(ctx)), queue_(queue) {}
  void wait(Millis timeout) override;

 private:
  // Valid while this work is not done: the queue finishes every task before it goes.
  CollectiveQueue* queue_;
};

// Who ran the queue's tasks and how often the worker was woken: the counts that explain
// what a queued collective costs over a blocking one (bench/queue_overhead.cpp).
struct QueueStats {
  uint64_t by_caller = 0;   // blocking callers that found the queue idle (try_run_here)
  uint64_t by_driver = 0;   // threads waiting on a Work (drive_until)
  uint64_t by_worker = 0;   // the worker thread
  uint64_t worker_wakeups = 0;  // times the worker returned from a wait with tasks queued
  uint64_t worker_notifies = 0; // pushes that had to wake an idle worker
};

class CollectiveQueue {
 public:
  static constexpr std::chrono::microseconds kGrace{50};
  // The worker's park (see "park").
  static constexpr std::chrono::microseconds kMaxPoll{500};

  // Runs one collective and returns its error (null when it succeeded).
  using Runner = std::function<std::exception_ptr(const CollArgs&)>;
  // Whether a task may run on a caller's thread (see "inline").
  using InlineTest = std::function<bool(const CollArgs&)>;

  CollectiveQueue(Runner run, InlineTest runs_inline, bool waiters_run);
  ~CollectiveQueue();  // stop()
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Numbers `args` and queues it; the returned Work completes when it ran. Throws
  // AbortedError with `ctx` once stopping.
  WorkPtr push(CollArgs args, const ErrorContext& ctx, Millis wait_timeout);
  // A blocking caller: when the queue is idle and empty, numbers `args`, runs it here
  // and returns its error through `err`; otherwise returns false and does nothing.
  bool try_run_here(CollArgs& args, std::exception_ptr& err);
  // Fails every task still queued with the error `error_for` builds for it.
  void fail_queued(const std::function<std::exception_ptr(const CollArgs&)>& error_for);
  // Called with each collective as it is numbered, under the queue's lock (the flight
  // recorder's "scheduled"); set before the first push.
  void on_numbered(std::function<void(const CollArgs&)> f) { on_numbered_ = std::move(f); }
  // Runs what is queued, waits for a running task, joins the worker. Idempotent.
  void stop();

  // For QueuedWork::wait: runs front tasks on this thread until `w` is done or the
  // deadline passes. Returns at once when waiters do not run tasks.
  void drive_until(const PromiseWork& w, std::chrono::steady_clock::time_point deadline);

  QueueStats stats();

 private:
  using Clock = std::chrono::steady_clock;
  struct Task {
    CollArgs args;
    std::shared_ptr<PromiseWork> work;
  };
  void number(CollArgs& args);  // under mu_
  std::function<void(const CollArgs&)> on_numbered_;
  // Runs the front task on this thread (takes and gives back mu_ through `lk`) and
  // counts it in `ran`.
  void run_front(std::unique_lock<std::mutex>& lk, uint64_t& ran);
  void worker_loop();

  Runner run_;
  InlineTest runs_inline_;
  const bool waiters_run_;
  std::mutex mu_;
  std::condition_variable worker_cv_;   // the worker: pushes (when idle) and stop()
  std::condition_variable drivers_cv_;  // drivers: a task finished, tasks failed, stop()
  std::deque<Task> queue_;
  int64_t next_seq_ = 0;
  bool busy_ = false;         // a task is running (worker, blocking caller or driver)
  bool stopping_ = false;
  bool worker_idle_ = false;  // the worker sleeps until the next push
  int drivers_ = 0;           // threads inside drive_until
  Clock::time_point grace_until_{};
  QueueStats stats_;          // under mu_
  std::thread worker_;
};

}  // namespace dpt
