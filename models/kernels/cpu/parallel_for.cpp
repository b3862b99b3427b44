#include "models/kernels/cpu/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <exception>
#include <vector>

#include "models/kernels/cpu/gemm.h"

#ifdef DPT_ONEDNN_OPENMP
#include <omp.h>
#endif

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

thread_local bool t_serial = false;

Pool& pool() {
  static Pool p(std::max(1, blas_threads()));
  return p;
}

#ifdef DPT_ONEDNN_OPENMP
// True while this thread's products run on an OpenMP team (libgomp's): the fp32 engine is
// onednn, or mkl (loaded on the GNU threading layer with oneDNN: gemm_engine.cpp), or the
// products are native bf16. Our loops then run on the same team, not a second pool.
bool products_on_openmp() {
  return gemm_engine() == GemmEngine::onednn || gemm_engine() == GemmEngine::mkl ||
         (gemm_precision() == GemmPrecision::bf16 && bf16_gemm_native());
}

// The same chunks as Pool::run (boundaries at multiples of grain, so a loop's results do
// not depend on which thread ran a chunk or how many there are), on the OpenMP team.
// An exception leaves no OpenMP region (that would terminate): the first is kept and
// rethrown once the loop is over.
void run_on_openmp(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  const int64_t chunks = (n + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(chunks, pool().threads()));
  if (threads < 2 || omp_in_parallel()) return f(0, n);
  std::exception_ptr error;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      f(c * grain, std::min(n, (c + 1) * grain));
    } catch (...) {
#pragma omp critical(dpt_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}
#endif

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  if (t_serial) return f(0, n);
  grain = std::max<int64_t>(grain, 1);
#ifdef DPT_ONEDNN_OPENMP
  if (products_on_openmp()) return run_on_openmp(n, grain, f);
#endif
  pool().run(n, grain, f);
}

SerialLoopsScope::SerialLoopsScope() : previous_(t_serial) { t_serial = true; }
SerialLoopsScope::~SerialLoopsScope() { t_serial = previous_; }

int parallel_threads() { return pool().threads(); }

}  // namespace dpt
