#pragma once
// PyTorch's Work over the project's Works.
//
// Terms:
//   op state   - everything one PyTorch call needs until its bytes have moved: the dpt
//                Works it issued ("pieces"), the tensors they point into (the user's,
//                and dense copies of non-contiguous ones), the outputs result() returns,
//                and `on_success`, run once when every piece is done (copies a
//                dense temporary back into a non-contiguous output, unpacks an allgather
//                into the output list). Shared by the DptWork facade and the watcher,
//                so a Work that Python drops early never frees a buffer in flight.
//   finalize   - the one-time end of an op: on_success (or the first piece's error),
//                then the c10 Future completed with the outputs or the error. Whoever
//                sees the pieces done first does it: a thread in wait(), is_completed(),
//                or the watcher.
//   watcher    - one thread per process group that finalizes ops nobody is waiting on:
//                ops whose Future was asked for (DDP's communication hooks chain on it)
//                and ops whose Work was dropped while still running. Collectives finish
//                in issue order (one worker per communicator runs them), so the watcher
//                waits on them first-in first-out and sleeps while they run; point-to-point
//                ops finish in any order and are polled every millisecond while pending.
//   completer  - the threads that complete the Futures of the ops the watcher finalizes,
//                running their callbacks. Not the watcher itself: a callback may wait on
//                another op's Future (PowerSGD's hook does, inside its then()), which only
//                the watcher finalizes. One thread per callback running at once, made on
//                demand and kept while busy, as Gloo's worker threads serve its callbacks.
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/work.h"

namespace dpt::torch_plugin {

struct OpState : std::enable_shared_from_this<OpState> {
  std::string name;                   // "allreduce", "send", ... for messages
  bool p2p = false;                   // finishes out of issue order
  std::vector<WorkPtr> pieces;
  std::vector<at::Tensor> keep_alive;
  std::vector<at::Tensor> outputs;
  std::vector<std::function<void()>> on_success;  // in order, once, when all pieces are done
  Millis wait_timeout{0};
  std::function<int()> source_rank;   // receives from any source: who sent it             // default for wait(): the group's timeout + grace

  // Tests the pieces without blocking; finalizes and returns true once all are done
  // (or one failed).
  bool poll();
  // Waits up to `timeout` for the pieces, then finalizes. Returns false when the time
  // ran out with pieces still running (the op goes on).
  bool wait_for(Millis timeout);
  bool finished() const;
  std::exception_ptr error() const;
  c10::intrusive_ptr<c10::ivalue::Future> future();

 private:
  void finalize(std::exception_ptr e);
  void complete(const c10::intrusive_ptr<c10::ivalue::Future>& fut);
  std::timed_mutex pieces_mu_;  // held by whoever tests or waits on the pieces
  std::mutex finalize_mu_;  // on_success runs once
  mutable std::mutex mu_;
  bool finished_ = false;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};
using OpStatePtr = std::shared_ptr<OpState>;

class Completer {
 public:
  ~Completer();  // runs what is queued, then joins
  void post(std::function<void()> task);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int idle_ = 0;     // threads waiting for a task and not yet claimed by post()
  int wakeups_ = 0;  // claimed by post(), not yet taken by a woken thread
  bool stopping_ = false;
};

class Watcher {
 public:
  Watcher();
  ~Watcher();  // finalizes everything still pending (each op is bounded by its timeout)
  void watch(OpStatePtr op);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<OpStatePtr> collectives_;
  std::vector<OpStatePtr> p2p_;
  bool stopping_ = false;
  Completer completer_;  // destroyed after the thread below is joined
  std::thread thread_;
};

class DptWork : public c10d::Work {
 public:
  DptWork(OpStatePtr op, int rank, c10d::OpType type, std::weak_ptr<Watcher> watcher);
  ~DptWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  // timeout 0 (PyTorch's default): the process group's timeout.
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override {}
  int sourceRank() const override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  OpStatePtr op_;
  std::weak_ptr<Watcher> watcher_;  // gone with its process group
  bool watched_ = false;
};

}  // namespace dpt::torch_plugin
