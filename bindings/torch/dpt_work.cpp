#include "bindings/torch/dpt_work.h"

#include <ATen/core/jit_type.h>

namespace dpt::torch_plugin {

using Clock = std::chrono::steady_clock;

// Set on the watcher's thread: Futures finalized there are completed by its Completer.
static thread_local Completer* watcher_completer = nullptr;

bool OpState::finished() const {
  std::lock_guard<std::mutex> lk(mu_);
  return finished_;
}

std::exception_ptr OpState::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

// test() is the truth for every kind of dpt Work: false while running, true when done,
// throws the op's error once it failed. Pieces are settled when each is done or failed.
static bool settle(const WorkPtr& w, std::exception_ptr& first_error) {
  try {
    return w->test();
  } catch (...) {
    if (!first_error) first_error = std::current_exception();
    return true;
  }
}

bool OpState::poll() {
  if (finished()) return true;
  std::unique_lock<std::timed_mutex> held(pieces_mu_, std::try_to_lock);
  if (!held.owns_lock()) return false;  // another thread is waiting on them
  std::exception_ptr err;
  for (const auto& w : pieces)
    if (!settle(w, err)) return false;
  held.unlock();
  finalize(err);
  return true;
}

bool OpState::wait_for(Millis timeout) {
  if (finished()) return true;
  const auto deadline = Clock::now() + timeout;
  // Another thread may be waiting on the pieces (the watcher): wait for it no longer
  // than our own deadline.
  std::unique_lock<std::timed_mutex> held(pieces_mu_, deadline);
  if (!held.owns_lock()) return finished();
  std::exception_ptr err;
  for (const auto& w : pieces) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    try {
      w->wait(std::max(left, Millis(0)));
    } catch (...) {
      // Its error or our deadline: settle() tells which.
    }
    if (!settle(w, err)) return false;
  }
  held.unlock();
  finalize(err);
  return true;
}

void OpState::finalize(std::exception_ptr e) {
  std::lock_guard<std::mutex> once(finalize_mu_);
  if (finished()) return;
  if (!e) {
    try {
      for (const auto& f : on_success) f();
    } catch (...) {
      e = std::current_exception();
    }
  }
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  {
    std::lock_guard<std::mutex> lk(mu_);
    finished_ = true;
    error_ = e;
    fut = future_;
  }
  if (!fut) return;
  if (watcher_completer)
    watcher_completer->post([this, self = shared_from_this(), fut] { complete(fut); });
  else
    complete(fut);
}

void OpState::complete(const c10::intrusive_ptr<c10::ivalue::Future>& fut) {
  // Runs the Future's callbacks (DDP's hook continuations) on this thread.
  std::exception_ptr e = error();
  if (e)
    fut->setError(e);
  else
    fut->markCompleted(c10::IValue(outputs));
}

c10::intrusive_ptr<c10::ivalue::Future> OpState::future() {
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  bool done = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (future_) return future_;
    std::vector<c10::Device> devices;
    for (const auto& t : outputs)
      if (t.is_cuda() && std::find(devices.begin(), devices.end(), t.device()) == devices.end())
        devices.push_back(t.device());
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices);
    fut = future_;
    done = finished_;
  }
  // Finished before anyone asked: finalize() saw no Future, so complete this one here.
  if (done) complete(fut);
  return fut;
}

// ---- completer ----

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Completer::post(std::function<void()> task) {
  std::lock_guard<std::mutex> lk(mu_);
  tasks_.push_back(std::move(task));
  // Each task gets a thread of its own to run on: an idle one, woken and no longer
  // counted idle, or a new one. A thread blocked in a callback is never counted on.
  if (idle_ == 0) {
    threads_.emplace_back([this] { run(); });
  } else {
    --idle_;
    ++wakeups_;
    cv_.notify_one();
  }
}

void Completer::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (!tasks_.empty()) {
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lk.unlock();
      task();
      task = nullptr;  // releases the op unlocked: freeing its tensors may take the GIL
      lk.lock();
      continue;
    }
    if (stopping_) return;
    ++idle_;
    cv_.wait(lk, [this] { return wakeups_ > 0 || stopping_; });
    if (wakeups_ > 0)
      --wakeups_;  // post() took it off the idle count
    else
      --idle_;  // stopping
  }
}

// ---- watcher ----

Watcher::Watcher() : thread_([this] { loop(); }) {}

Watcher::~Watcher() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watcher::watch(OpStatePtr op) {
  if (op->finished()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (op->p2p)
      p2p_.push_back(std::move(op));
    else
      collectives_.push_back(std::move(op));
  }
  cv_.notify_all();
}

void Watcher::loop() {
  // A slice short enough to keep polling point-to-point ops while a collective runs.
  constexpr Millis kPollSlice{1};
  constexpr Millis kIdleSlice{100};
  watcher_completer = &completer_;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (collectives_.empty() && p2p_.empty()) {
      if (stopping_) return;
      cv_.wait(lk);
      continue;
    }
    OpStatePtr front = collectives_.empty() ? nullptr : collectives_.front();
    std::vector<OpStatePtr> p2p = p2p_;
    lk.unlock();
    bool front_done = false;
    if (front)
      front_done = front->wait_for(p2p.empty() ? kIdleSlice : kPollSlice);
    else
      std::this_thread::sleep_for(kPollSlice);
    std::vector<OpStatePtr> done;
    for (const auto& op : p2p)
      if (op->poll()) done.push_back(op);
    lk.lock();
    if (front_done) collectives_.pop_front();  // `front` still holds it
    for (const auto& op : done) p2p_.erase(std::find(p2p_.begin(), p2p_.end(), op));
    lk.unlock();
    // The last references go here, unlocked: freeing an op's tensors may take the GIL, and
    // the thread holding the GIL may be waiting for mu_ in watch().
    front.reset();
    p2p.clear();
    done.clear();
    lk.lock();
  }
}

// ---- the PyTorch facade ----

DptWork::DptWork(OpStatePtr op, int rank, c10d::OpType type, std::weak_ptr<Watcher> watcher)
    : c10d::Work(rank, type), op_(std::move(op)), watcher_(std::move(watcher)) {
  op_->poll();  // ops with nothing in flight finish here
}

DptWork::~DptWork() {
  // Dropped while its bytes still move: the watcher keeps the buffers until they stop.
  if (!watched_ && !op_->finished())
    if (auto w = watcher_.lock()) w->watch(op_);
}

bool DptWork::isCompleted() { return op_->poll(); }

bool DptWork::isSuccess() const { return op_->finished() && !op_->error(); }

std::exception_ptr DptWork::exception() const { return op_->error(); }

std::vector<at::Tensor> DptWork::result() { return op_->outputs; }

int DptWork::sourceRank() const {
  if (!op_->source_rank) throw std::runtime_error("dpt: sourceRank() is only known for receives from any source");
  return op_->source_rank();
}

bool DptWork::wait(std::chrono::milliseconds timeout) {
  const Millis t = timeout.count() > 0 ? Millis(timeout.count()) : op_->wait_timeout;
  if (!op_->wait_for(t))
    throw std::runtime_error("dpt: " + op_->name + " on rank " + std::to_string(rank_) + " is still running after " +
                             std::to_string(t.count()) + " ms (Work.wait timeout)");
  if (auto e = op_->error()) std::rethrow_exception(e);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> DptWork::getFuture() {
  auto fut = op_->future();
  if (!watched_) {
    watched_ = true;
    if (auto w = watcher_.lock()) w->watch(op_);
  }
  return fut;
}

}  // namespace dpt::torch_plugin
