#include "models/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "models/gemm.h"

namespace dpt {
namespace {

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
    std::unique_lock busy(busy_, std::try_to_lock);
    const int64_t chunks = (n + grain - 1) / grain;
    if (!busy.owns_lock() || workers_.empty() || chunks < 2) {
      f(0, n);
      return;
    }
    {
      std::lock_guard lock(mu_);
      f_ = &f;
      n_ = n;
      grain_ = grain;
      next_.store(0);
      open_ = true;
      ++generation_;
    }
    wake_.notify_all();
    claim_chunks();
    std::unique_lock lock(mu_);
    open_ = false;  // workers that have not joined yet will not
    done_.wait(lock, [&] { return active_ == 0; });
    f_ = nullptr;
  }

 private:
  void claim_chunks() {
    for (;;) {
      const int64_t begin = next_.fetch_add(grain_);
      if (begin >= n_) return;
      (*f_)(begin, std::min(begin + grain_, n_));
    }
  }

  void work() {
    uint64_t seen = 0;
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (!open_) continue;
      ++active_;
      lock.unlock();
      claim_chunks();
      lock.lock();
      if (--active_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex busy_;  // one loop at a time; others run serially
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* f_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  std::atomic<int64_t> next_{0};
  uint64_t generation_ = 0;
  int active_ = 0;
  bool open_ = false, stop_ = false;
};

Pool& pool() {
  static Pool p(std::max(1, blas_threads()));
  return p;
}

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  pool().run(n, std::max<int64_t>(grain, 1), f);
}

int parallel_threads() { return pool().threads(); }

}  // namespace dpt
