// DistributedDataParallel for PyTorch's C++ frontend (libtorch), over dpt's communicators.
//
//   dpt::Context ctx = dpt::init(argc, argv);              // mpirun, srun, launch, torchrun
//   auto net = std::make_shared<Net>();                    // any torch::nn::Module
//   dpt::torch::DistributedDataParallel ddp(net, ctx);     // rank 0's parameters everywhere
//   torch::optim::SGD optimizer(net->parameters(), 0.01);
//   optimizer.zero_grad();
//   torch::Tensor loss = torch::mse_loss(ddp.forward(x), y);
//   loss.backward();                                       // gradients averaged over the ranks
//   optimizer.step();
//
// What each call does (PyTorch DistributedDataParallel's design, read from its docs and
// paper; our code):
//   constructor  collective: every rank must hold the same parameters (names, shapes,
//                dtypes; std::runtime_error naming the first rank and parameter that
//                differ); rank 0's parameters and buffers are then copied everywhere.
//                A hook is registered on each parameter's gradient accumulator.
//   forward      runs the module's forward; in training with grad mode on, copies rank
//                0's buffers first (broadcast_buffers) and arms the next backward.
//   backward     the user's own loss.backward(): as the gradients of a bucket (whole
//                parameters, in reverse order of registration, first bucket small) are
//                all accumulated, the bucket's allreduce starts on the communicator's
//                thread while backward goes on; when backward returns, every gradient
//                is the average over the ranks (an autograd final callback waits).
//   no_sync()    a guard: forwards under it make backwards that accumulate locally; the
//                next synchronised backward averages the sum (gradient accumulation).
//   unused       a parameter that gets no gradient in a synchronised backward is an
//                error naming it, unless find_unused_parameters: then the graph is
//                traced from forward's outputs, the unused ones count as zero, and a
//                parameter no rank used keeps no gradient (as PyTorch).
//   backend      Context::switch_backend between steps moves the wrapper with it.
//   views        gradient_as_bucket_view: each .grad is made a view into its bucket at its
//                hook, so the averages need no copy back (and, zeroed in place, no copy in).
// Tensors: CPU or CUDA, float32/float64/float16/bfloat16 (one bucket per dtype and
// device run); CUDA buckets go to the communicator as device buffers (NCCL reduces them
// there, tcp and a non-CUDA-aware MPI stage them through host memory).
#pragma once

#include <torch/torch.h>

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dpt/init.h"

namespace dpt::torch {

struct DdpOptions {
  double bucket_cap_mb = 25;         // PyTorch's bucket_cap_mb
  double first_bucket_mb = 1;        // the first (last layers') bucket, small to start early
  bool broadcast_buffers = true;     // rank 0's buffers before each training forward
  bool find_unused_parameters = false;
  bool overlap = true;               // false: every bucket after backward (for measurements)
  // Each .grad becomes a view into its bucket (PyTorch's option of that name): the
  // averages are in .grad when the bucket's allreduce ends, with no copy back; and with
  // optimizer.zero_grad(false) (zeroed in place, not released) autograd accumulates into
  // the bucket, with no copy in either. Not with ZeRO stage 2.
  bool gradient_as_bucket_view = false;
  // After the first synchronised backward, the buckets are laid out again in the order the
  // gradients arrived on rank 0 (PyTorch DDP does the same): a model that registers its
  // parameters in another order than its forward uses them otherwise fills its first
  // bucket last, and nothing launches before backward ends. Rank 0's order is broadcast,
  // so every rank reduces the same layout.
  bool rebuild_buckets = true;
};

// What the last synchronised backward spent on communication.
struct DdpStats {
  int buckets = 0;
  double comm_ms = 0;      // from each bucket's launch (or the previous one's end) to its end
  double exposed_ms = 0;   // the part after backward's compute ended: what the step waited
  double backward_ms = 0;  // first gradient hook to the end of the final wait
  long long bytes = 0;     // handed to the communicator
  int launched_early = 0;  // buckets launched while some parameter's gradient was still to come
  bool rebuilt = false;    // the buckets follow the gradients' arrival order (rebuild_buckets)
};

// The part of the wrapper that does not depend on the module's type: hooks, buckets,
// collectives. Users hold a DistributedDataParallel, not this.
class Reducer {
 public:
  Reducer(::torch::nn::Module& module, Context& ctx, const DdpOptions& options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void before_forward();
  void after_forward(const std::vector<at::Tensor>& outputs);
  void set_sync(bool on);
  bool sync() const;
  DdpStats last_stats() const;

  // For ZeroRedundancyOptimizer (zero.h): the context, and ZeRO-2's routing of each
  // gradient to the rank that owns its parameter (owner_of(param) = rank; the other
  // ranks' .grad of it is released after the backward).
  Context::Impl& context() const;
  void reduce_to_owners(const std::function<int(const at::Tensor&)>& owner_of);
  bool reduces_to_owners() const;

  // For ElasticLoop (elastic.h), after a collective failed and the communicator was
  // aborted: waits for the buckets in flight (they end at once) and forgets the
  // interrupted backward, so the step can run again; then, over the next generation's
  // communicator, every rank takes `root`'s parameters and buffers (collective).
  void abandon_backward();
  void broadcast_state(int root);
  // The communication error the last backward failed with, if any (then cleared): autograd
  // may rethrow it wrapped.
  std::exception_ptr take_comm_failure();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

namespace detail {
inline void collect(std::vector<at::Tensor>& out, const at::Tensor& t) { out.push_back(t); }
inline void collect(std::vector<at::Tensor>& out, const std::vector<at::Tensor>& ts) {
  out.insert(out.end(), ts.begin(), ts.end());
}
template <class... T>
void collect(std::vector<at::Tensor>& out, const std::tuple<T...>& tuple) {
  std::apply([&](const auto&... e) { (collect(out, e), ...); }, tuple);
}
template <class T>
void collect(std::vector<at::Tensor>&, const T&) {}  // not a tensor: nothing to trace
}  // namespace detail

template <class M>
class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<M> module, Context& ctx, const DdpOptions& options = {})
      : module_(std::move(module)), reducer_(checked(module_), ctx, options) {}
  DistributedDataParallel(::torch::nn::ModuleHolder<M> module, Context& ctx, const DdpOptions& options = {})
      : DistributedDataParallel(module.ptr(), ctx, options) {}

  template <class... Args>
  auto forward(Args&&... args) {
    reducer_.before_forward();
    auto out = module_->forward(std::forward<Args>(args)...);
    std::vector<at::Tensor> tensors;
    detail::collect(tensors, out);
    reducer_.after_forward(tensors);
    return out;
  }

  // While the guard lives, forwards make backwards that accumulate without communicating.
  class NoSync {
   public:
    explicit NoSync(Reducer& r) : reducer_(&r), before_(r.sync()) { r.set_sync(false); }
    NoSync(NoSync&& o) noexcept : reducer_(o.reducer_), before_(o.before_) { o.reducer_ = nullptr; }
    NoSync(const NoSync&) = delete;
    ~NoSync() {
      if (reducer_) reducer_->set_sync(before_);
    }

   private:
    Reducer* reducer_;
    bool before_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(reducer_); }

  std::shared_ptr<M> module() const { return module_; }
  M* operator->() const { return module_.get(); }
  std::vector<at::Tensor> parameters() const { return module_->parameters(); }
  DdpStats last_stats() const { return reducer_.last_stats(); }
  Reducer& reducer() { return reducer_; }

 private:
  static ::torch::nn::Module& checked(const std::shared_ptr<M>& m) {
    if (!m) throw std::invalid_argument("dpt::torch::DistributedDataParallel: the module is null");
    return *m;
  }
  std::shared_ptr<M> module_;
  Reducer reducer_;
};

template <class M>
DistributedDataParallel(std::shared_ptr<M>, Context&, const DdpOptions& = {}) -> DistributedDataParallel<M>;
template <class M>
DistributedDataParallel(::torch::nn::ModuleHolder<M>, Context&, const DdpOptions& = {}) -> DistributedDataParallel<M>;

}  // namespace dpt::torch
