// Who runs queued collectives (comm/dispatch/collective_queue.h): a thread waiting on a queued
// collective runs the ones before it and itself; the worker runs what nobody waits for;
// issue order holds throughout. A one-rank communicator whose "native" collective
// records the thread and sequence number of each call stands in for a backend.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.h"

using namespace dpt;
using namespace std::chrono_literals;

namespace {

class RecordingCommunicator : public Communicator {
 public:
  explicit RecordingCommunicator(bool waiters_run) : Communicator(0, 1, options(waiters_run)) {}
  ~RecordingCommunicator() override { shutdown_worker(); }
  std::string backend_name() const override { return "recording"; }

  struct Call {
    int64_t seq;
    std::thread::id thread;
  };
  std::vector<Call> calls() {
    std::lock_guard<std::mutex> lk(mu_);
    return calls_;
  }
  // The next collective blocks until release() (on whichever thread runs it).
  void hold_next() { held_ = true; }
  void release() {
    std::lock_guard<std::mutex> lk(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool holding() {
    std::lock_guard<std::mutex> lk(mu_);
    return holding_;
  }

 protected:
  WorkPtr do_isend(const Buffer&, int, int64_t) override { throw std::logic_error("no point-to-point"); }
  WorkPtr do_irecv(const Buffer&, int, int64_t) override { throw std::logic_error("no point-to-point"); }
  bool native_supports(const CollArgs&) const override { return true; }
  bool native_preferred(const CollArgs&) const override { return true; }
  void run_native(const CollArgs& a) override {
    std::unique_lock<std::mutex> lk(mu_);
    calls_.push_back({a.seq, std::this_thread::get_id()});
    if (held_.exchange(false)) {
      holding_ = true;
      cv_.wait(lk, [&] { return released_; });
      holding_ = false;
    }
  }

 private:
  static CommOptions options(bool waiters_run) {
    CommOptions o;
    o.waiters_run = waiters_run;
    return o;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Call> calls_;
  std::atomic<bool> held_{false};
  bool released_ = false;
  bool holding_ = false;
};

Buffer one_float(float& x) { return Buffer{&x, 1, DType::f32, {}}; }

}  // namespace

TEST_CASE("queue: a waiter runs the collectives queued behind a running one itself", "[queue]") {
  const bool waiters_run = GENERATE(true, false);
  INFO("waiters_run " << waiters_run);
  RecordingCommunicator c(waiters_run);
  float x = 1;
  // The first collective holds the worker (after its grace) until released; the other
  // nine queue behind it, and the main thread waits on the last.
  c.hold_next();
  std::vector<WorkPtr> works;
  for (int i = 0; i < 10; ++i) works.push_back(c.allreduce_async(one_float(x), one_float(x), ReduceOp::sum));
  while (!c.holding()) std::this_thread::sleep_for(1ms);
  std::thread releaser([&] {
    std::this_thread::sleep_for(500ms);  // the main thread is inside wait() by then
    c.release();
  });
  works.back()->wait();
  releaser.join();
  for (auto& w : works) CHECK(w->test());

  const auto calls = c.calls();
  REQUIRE(calls.size() == 10);
  for (size_t i = 0; i < calls.size(); ++i) CHECK(calls[i].seq == int64_t(i));  // issue order
  CHECK(calls[0].thread != std::this_thread::get_id());  // the held one ran on the worker
  int on_main = 0;
  for (size_t i = 1; i < calls.size(); ++i) on_main += calls[i].thread == std::this_thread::get_id();
  // With waiters running the queue, the nine behind the held one ran on the waiting
  // thread: no hand-off per collective. Without, all ran on the worker.
  CHECK(on_main == (waiters_run ? 9 : 0));
}

TEST_CASE("queue: a collective nobody waits for still runs (on the worker)", "[queue]") {
  RecordingCommunicator c(true);
  float x = 1;
  WorkPtr w = c.allreduce_async(one_float(x), one_float(x), ReduceOp::sum);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!w->test() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  REQUIRE(w->test());
  const auto calls = c.calls();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].thread != std::this_thread::get_id());
}

TEST_CASE("queue: a blocking call on an idle queue runs on the caller, behind queued ones in order", "[queue]") {
  RecordingCommunicator c(true);
  float x = 1;
  c.allreduce(one_float(x), ReduceOp::sum);  // idle: runs here
  WorkPtr w = c.allreduce_async(one_float(x), one_float(x), ReduceOp::sum);
  c.allreduce(one_float(x), ReduceOp::sum);  // queued one first: this call waits for it in its turn
  CHECK(w->test());
  const auto calls = c.calls();
  REQUIRE(calls.size() == 3);
  for (size_t i = 0; i < calls.size(); ++i) CHECK(calls[i].seq == int64_t(i));
  CHECK(calls[0].thread == std::this_thread::get_id());
  CHECK(calls[2].thread == std::this_thread::get_id());
}

TEST_CASE("queue: a collective a waiter left behind runs without anyone waiting for it", "[queue]") {
  // The waiter runs A (held for 100 ms, so the worker parks meanwhile) and returns with
  // B still queued; nobody waits for B, so the parked worker must find it (within its
  // park, collective_queue.h "park") rather than sleep until the next push.
  RecordingCommunicator c(true);
  float x = 1;
  c.hold_next();
  WorkPtr a = c.allreduce_async(one_float(x), one_float(x), ReduceOp::sum);
  WorkPtr b = c.allreduce_async(one_float(x), one_float(x), ReduceOp::sum);
  std::thread releaser([&] {
    while (!c.holding()) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(100ms);
    c.release();
  });
  a->wait();
  releaser.join();
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (!b->test() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  CHECK(b->test());
  b->wait();  // ends the test either way (runs B here if the worker never did)
  const auto calls = c.calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[1].seq == 1);
}
