// dpt::torch::Reducer (dpt/torch/ddp.h): the hooks, buckets and collectives behind the
// libtorch DistributedDataParallel.
//
// Terms:
//   hook      a post-hook on a parameter's gradient accumulator (AccumulateGrad): it runs
//             once per backward, right after the parameter's .grad was accumulated. The
//             accumulators are held here: autograd keeps only a weak reference, and a
//             re-created accumulator would lose the hook.
//   bucket    whole parameters of one dtype and device, in reverse registration order
//             (backward's usual order) until the first synchronised backward, then in the
//             order its gradients arrived on rank 0 (rebuild_buckets), copied into one
//             flat tensor as their hooks fire; the
//             bucket's allreduce (avg) is queued when its last parameter is in, strictly
//             in bucket order (collectives must be issued alike on every rank), and runs
//             on the communicator's worker thread while backward goes on.
//   finish    an autograd final callback queued by a backward's first hook: it launches
//             what is left, waits, and copies the averages back into .grad, so the
//             user's loss.backward() returns with averaged gradients.
//   armed     a training forward with grad mode on and sync on was made through the
//             wrapper: its backward synchronises. Under no_sync a forward instead
//             credits one local backward. A backward through the parameters with neither
//             is an error (its gradients would silently not be averaged).
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <mutex>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "api/context_impl.h"
#include "api/trainer/elastic_setup.h"
#include "backends/registration.h"
#include "bindings/libtorch/tensor_comm.h"
#include "dpt/torch/ddp.h"
#include "parallel/ranks_differing.h"

namespace dpt::torch {
namespace {

using Clock = std::chrono::steady_clock;
const std::string kWho = "dpt::torch::DistributedDataParallel";

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// gradient_as_bucket_view: a tensor over `count` elements of `flat` from `offset`, shaped
// like `param`, sharing the bucket's storage but not an autograd view of it (libtorch's
// Optimizer::zero_grad calls detach_() on every .grad, which a view refuses).
at::Tensor alias_in(const at::Tensor& flat, int64_t offset, const at::Tensor& param) {
  std::vector<int64_t> strides(param.sizes().size());
  int64_t stride = 1;
  for (size_t d = strides.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= param.sizes()[d];
  }
  at::Tensor t = at::empty({0}, flat.options());
  t.set_(flat.storage(), flat.storage_offset() + offset, param.sizes(), strides);
  return t;
}

std::string describe(const std::string& name, const at::Tensor& t) {
  std::ostringstream s;
  s << name << ' ' << c10::toString(t.scalar_type()) << ' ' << t.sizes() << ';';
  return s.str();
}

}  // namespace

struct Reducer::Impl {
  struct Param {
    std::string name;
    at::Tensor tensor;
    size_t bucket = 0;
    int64_t offset = 0;  // in the bucket's flat tensor
    bool ready = false;  // its hook fired in this backward (or it was found unused)
    bool reached = false;  // find_unused: reached from forward's outputs
    bool contributed = false;  // had a gradient when its bucket filled (this or a no_sync backward)
  };
  struct Bucket {
    at::Tensor flat;
    std::vector<size_t> params;
    size_t pending = 0;
    std::vector<WorkPtr> works;  // one allreduce, or ZeRO-2's reduce per owner run
    Clock::time_point launched_at;
    std::shared_ptr<Clock::time_point> done_at = std::make_shared<Clock::time_point>();
  };

  Impl(Context& context, const DdpOptions& o) : ctx(context.impl()), options(o) {}

  Context::Impl& ctx;
  DdpOptions options;
  std::vector<Param> params;
  std::vector<std::pair<std::string, at::Tensor>> buffers;
  std::vector<Bucket> buckets;
  std::vector<c10::intrusive_ptr<::torch::autograd::Node>> accumulators;
  std::shared_ptr<Impl*> self = std::make_shared<Impl*>(this);  // what the hooks reach; null once gone
  Context::Impl::Wrapper registration;
  std::vector<int> owner;  // ZeRO-2: each parameter's owning rank; empty: allreduce

  std::mutex mu;  // hooks of CUDA backwards run on the device threads
  bool in_backward = false;   // armed or reducing: Context::switch_backend waits for neither
  bool armed = false;
  bool sync = true;
  int local_forwards = 0;     // no_sync forwards not yet backwarded
  bool running = false;       // between a backward's first hook and its finish
  bool running_syncs = false;
  size_t next_launch = 0;
  size_t arrived = 0;             // parameters ready in this backward
  std::vector<size_t> arrival;    // their order, kept until the buckets are rebuilt
  bool rebuilt = false;
  Clock::time_point first_hook;
  DdpStats stats;

  Communicator& comm() { return *ctx.comm; }

  void build(::torch::nn::Module& module) {
    for (const auto& item : module.named_parameters(/*recurse=*/true)) {
      if (!item.value().requires_grad()) continue;
      check_dense(item.value(), kWho + ": parameter '" + item.key() + "'");
      params.push_back(Param{item.key(), item.value()});
    }
    for (const auto& item : module.named_buffers(/*recurse=*/true)) {
      check_dense(item.value(), kWho + ": buffer '" + item.key() + "'");
      buffers.emplace_back(item.key(), item.value());
    }
    if (params.empty()) throw std::invalid_argument(kWho + ": the module has no parameter that requires a gradient");

    // A process restarted under launch --elastic joins members that are not constructing
    // a wrapper: they check the structure and send the state when its ElasticLoop starts
    // (broadcast_state), so no collective here.
    if (!(ctx.elastic && ctx.elastic->joining)) {
      check_same_structure();
      ::torch::NoGradGuard no_grad;
      for (Param& p : params) broadcast_from_0(p.tensor);
      for (auto& [name, t] : buffers) broadcast_from_0(t);
    }
    std::vector<size_t> reverse_registration(params.size());
    for (size_t k = 0; k < params.size(); ++k) reverse_registration[k] = params.size() - 1 - k;
    plan_buckets(reverse_registration);
    register_hooks();
    registration.name = kWho;
    registration.in_backward = &in_backward;
    ctx.wrappers.push_back(&registration);
  }

  // Collective: the same FNV-1a digest of the parameters' and buffers' names, dtypes and
  // shapes on every rank (group_hash hashes any name), or an error naming the ranks.
  void check_same_structure() {
    std::string all;
    for (const Param& p : params) all += describe(p.name, p.tensor);
    for (const auto& [name, t] : buffers) all += describe(name, t);
    const std::string bad = ranks_differing(comm(), backends::group_hash(all));
    if (!bad.empty())
      throw std::runtime_error(kWho + ": ranks [" + bad + "] hold other parameters or buffers than rank 0 " +
                               "(names, dtypes or shapes): every rank must build the same module");
  }

  void broadcast_from_0(at::Tensor& t) { broadcast_from(t, 0); }
  void broadcast_from(at::Tensor& t, int root) {
    if (comm().size() == 1 || t.numel() == 0) return;
    at::Tensor dense = t.contiguous();
    comm().broadcast(whole(dense), root);
    if (!dense.is_same(t)) t.copy_(dense);
  }

  // The parameters in `order`; a new bucket at a dtype/device change or at the cap.
  void plan_buckets(const std::vector<size_t>& order) {
    const double first_cap = options.first_bucket_mb * 1024 * 1024, cap = options.bucket_cap_mb * 1024 * 1024;
    std::vector<std::vector<size_t>> groups;
    double bytes = 0;
    for (size_t k : order) {
      const at::Tensor& t = params[k].tensor;
      const bool fits = !groups.empty() &&
                        t.scalar_type() == params[groups.back().front()].tensor.scalar_type() &&
                        t.device() == params[groups.back().front()].tensor.device() &&
                        bytes < (groups.size() == 1 ? first_cap : cap);
      if (!fits) {
        groups.emplace_back();
        bytes = 0;
      }
      groups.back().push_back(k);
      bytes += double(t.numel()) * double(t.element_size());
    }
    buckets.clear();
    for (const auto& g : groups) {
      Bucket b;
      int64_t n = 0;
      for (size_t k : g) {
        params[k].bucket = buckets.size();
        params[k].offset = n;
        n += params[k].tensor.numel();
      }
      b.flat = at::empty({n}, params[g.front()].tensor.options().requires_grad(false));
      b.params = g;
      b.pending = g.size();
      buckets.push_back(std::move(b));
    }
  }

  // The parameters in bucket order, as plan_buckets takes them.
  std::vector<size_t> layout() const {
    std::vector<size_t> order;
    for (const Bucket& b : buckets) order.insert(order.end(), b.params.begin(), b.params.end());
    return order;
  }

  // Lays the buckets out in `order` between backwards (nothing in flight). A .grad that is
  // a view of its old bucket (gradient_as_bucket_view) moves into its new slot.
  void relayout(const std::vector<size_t>& order) {
    std::vector<at::Tensor> moving(params.size());
    if (options.gradient_as_bucket_view)
      for (size_t k = 0; k < params.size(); ++k) moving[k] = params[k].tensor.grad();
    plan_buckets(order);
    ::torch::NoGradGuard no_grad;
    for (size_t k = 0; k < params.size(); ++k) {
      if (!moving[k].defined()) continue;
      Param& p = params[k];
      buckets[p.bucket].flat.narrow(0, p.offset, p.tensor.numel()).copy_(moving[k].reshape({-1}));
      p.tensor.mutable_grad() = alias_in(buckets[p.bucket].flat, p.offset, p.tensor);
    }
  }

  // Rank 0's `order` (a permutation of the parameters) on every rank.
  std::vector<size_t> agree_on(const std::vector<size_t>& order, int root) {
    std::vector<int64_t> wire(order.begin(), order.end());
    if (comm().size() > 1) comm().broadcast(make_buffer(wire.data(), wire.size()), root);
    std::vector<size_t> agreed(wire.begin(), wire.end());
    std::vector<bool> seen(params.size(), false);
    for (size_t k : agreed) {
      if (k >= params.size() || seen[k])
        throw std::runtime_error(kWho + ": rank " + std::to_string(root) +
                                 "'s bucket order is not a permutation of this rank's parameters");
      seen[k] = true;
    }
    return agreed;
  }

  // After the first synchronised backward: the buckets in rank 0's arrival order.
  void rebuild_from_arrival() {
    rebuilt = true;
    if (arrival.size() != params.size()) return;  // cannot happen: finish checked every parameter
    const std::vector<size_t> order = agree_on(arrival, 0);
    arrival.clear();
    arrival.shrink_to_fit();
    if (order != layout()) relayout(order);
  }

  void register_hooks() {
    for (size_t i = 0; i < params.size(); ++i) {
      auto acc = ::torch::autograd::impl::grad_accumulator(params[i].tensor);
      std::weak_ptr<Impl*> weak = self;
      acc->add_post_hook(std::make_unique<::torch::autograd::utils::LambdaPostHook>(
          [weak, i](const ::torch::autograd::variable_list& outputs, const ::torch::autograd::variable_list&) {
            if (auto s = weak.lock(); s && *s) (*s)->noting_failure([&] { (*s)->on_gradient(i); });
            return outputs;
          }));
      accumulators.push_back(std::move(acc));
    }
  }

  // A communication error inside backward reaches the caller of loss.backward() through
  // autograd's engine, which may wrap it; ElasticLoop asks here what it was.
  std::exception_ptr comm_failure;
  template <class F>
  void noting_failure(F&& f) {
    try {
      f();
    } catch (const CommError&) {
      comm_failure = std::current_exception();
      throw;
    }
  }

  void on_gradient(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (!running) begin_backward();
    if (running_syncs) mark_ready(i);
  }

  // The first hook of a backward: which kind it is, and its finish queued.
  void begin_backward() {
    if (!armed && local_forwards == 0)
      throw std::logic_error(kWho + ": a backward reached the wrapped module's parameters, but its forward did not go "
                             "through DistributedDataParallel::forward, so its gradients would not be averaged; "
                             "call ddp.forward(...) (or the module itself under ddp.no_sync())");
    running = true;
    running_syncs = armed;
    stats.launched_early = 0;
    armed = false;
    if (!running_syncs) --local_forwards;
    first_hook = Clock::now();
    std::weak_ptr<Impl*> weak = self;
    ::torch::autograd::Engine::get_default_engine().queue_callback([weak] {
      if (auto s = weak.lock(); s && *s) (*s)->noting_failure([&] { (*s)->finish(); });
    });
    if (running_syncs && options.find_unused_parameters)
      for (size_t k = 0; k < params.size(); ++k)
        if (!params[k].reached) mark_ready(k);
  }

  void mark_ready(size_t i) {
    Param& p = params[i];
    if (p.ready)
      throw std::logic_error(kWho + ": parameter '" + p.name +
                             "' got a gradient twice in one backward (a module used by two backwards at once?)");
    p.ready = true;
    ++arrived;
    if (!rebuilt && options.rebuild_buckets) arrival.push_back(i);
    Bucket& b = buckets[p.bucket];
    at::Tensor slot = b.flat.narrow(0, p.offset, p.tensor.numel());
    // An unused parameter counts as zero, unless no_sync backwards left it a gradient.
    const at::Tensor& grad = p.tensor.grad();
    p.contributed = grad.defined();
    // gradient_as_bucket_view: a .grad that is already its slot (autograd accumulated into
    // it in place: zero_grad(false), or no_sync backwards) needs no copy; another becomes it.
    const bool in_slot = p.contributed && grad.data_ptr() == slot.data_ptr();
    if (p.contributed && !in_slot)
      slot.copy_(grad.reshape({-1}));
    else if (!p.contributed)
      slot.zero_();
    if (options.gradient_as_bucket_view && p.contributed && !in_slot)
      p.tensor.mutable_grad() = alias_in(b.flat, p.offset, p.tensor);
    if (--b.pending == 0 && options.overlap) launch_in_order();
  }

  void launch_in_order() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) launch(buckets[next_launch++]);
  }

  void launch(Bucket& b) {
    b.launched_at = Clock::now();
    if (arrived < params.size()) ++stats.launched_early;
    const Buffer buf = whole(b.flat);
    if (owner.empty()) {
      b.works.push_back(comm().allreduce_async(buf, buf, ReduceOp::avg));
    } else {
      // Runs of one owner's parameters (offsets grow along b.params), each reduced to it.
      size_t k = 0;
      while (k < b.params.size()) {
        const int root = owner[b.params[k]];
        const size_t begin = static_cast<size_t>(params[b.params[k]].offset);
        size_t end = begin;
        for (; k < b.params.size() && owner[b.params[k]] == root; ++k)
          end += static_cast<size_t>(params[b.params[k]].tensor.numel());
        const Buffer run = buf.slice(begin, end - begin);
        b.works.push_back(comm().reduce_async(run, run, ReduceOp::avg, root));
      }
    }
    stats.bytes += static_cast<long long>(buf.bytes());
    auto done_at = b.done_at;
    *done_at = Clock::time_point{};
    // Collectives complete in issue order: the bucket is done when its last one is.
    if (auto* pw = dynamic_cast<PromiseWork*>(b.works.back().get()))
      pw->on_finish([done_at] { *done_at = Clock::now(); });
  }

  // Waits for every launched bucket (errors swallowed: the caller reports its own).
  void drain() noexcept {
    for (Bucket& b : buckets) {
      for (WorkPtr& w : b.works) {
        try {
          w->wait(comm().wait_timeout());
        } catch (...) {
        }
      }
      b.works.clear();
    }
  }

  void reset_backward() {
    for (Param& p : params) p.ready = false;
    for (Bucket& b : buckets) b.pending = b.params.size();
    next_launch = 0;
    arrived = 0;
    if (!rebuilt) arrival.clear();
    running = running_syncs = false;
    in_backward = armed;
  }

  // The final callback of a backward.
  void finish() {
    std::lock_guard<std::mutex> lock(mu);
    if (!running_syncs) {
      running = false;
      return;
    }
    std::string missing;
    for (const Param& p : params)
      if (!p.ready) missing += (missing.empty() ? "'" : ", '") + p.name + "'";
    if (!missing.empty()) {
      drain();
      reset_backward();
      throw std::runtime_error(kWho + ": parameters " + missing +
                               " got no gradient in this backward, and the other ranks wait for them; if the model "
                               "leaves parameters unused in some steps, construct the wrapper with "
                               "find_unused_parameters = true");
    }
    launch_in_order();
    const Clock::time_point compute_end = Clock::now();
    const std::vector<float> used = options.find_unused_parameters ? used_anywhere() : std::vector<float>{};
    stats.buckets = static_cast<int>(buckets.size());
    stats.comm_ms = 0;
    Clock::time_point previous_done{};
    for (Bucket& b : buckets) {
      for (WorkPtr& w : b.works) w->wait(comm().wait_timeout());
      b.works.clear();
      if (*b.done_at == Clock::time_point{}) *b.done_at = Clock::now();
      stats.comm_ms += ms_between(std::max(b.launched_at, previous_done), *b.done_at);
      previous_done = *b.done_at;
    }
    const Clock::time_point end = Clock::now();
    stats.exposed_ms = ms_between(compute_end, end);
    stats.backward_ms = ms_between(first_hook, end);
    ::torch::NoGradGuard no_grad;
    for (size_t k = 0; k < params.size(); ++k) {
      if (!used.empty() && used[k] == 0) continue;  // no rank used it: its .grad stays as it was
      Param& p = params[k];
      if (!owner.empty() && owner[k] != comm().rank()) {
        p.tensor.mutable_grad().reset();  // ZeRO-2: another rank's gradient, not kept here
        continue;
      }
      const at::Tensor avg = buckets[p.bucket].flat.narrow(0, p.offset, p.tensor.numel()).view(p.tensor.sizes());
      at::Tensor& grad = p.tensor.mutable_grad();
      if (options.gradient_as_bucket_view) {
        // The average is in place already where .grad is the slot.
        if (!grad.defined() || grad.data_ptr() != avg.data_ptr()) grad = alias_in(buckets[p.bucket].flat, p.offset, p.tensor);
      } else if (grad.defined())
        grad.copy_(avg);
      else
        grad = avg.clone();
    }
    for (Param& p : params) p.reached = false;
    stats.rebuilt = rebuilt;  // of the layout this backward ran on
    if (options.rebuild_buckets && !rebuilt) rebuild_from_arrival();
    reset_backward();
  }

  // find_unused: which parameters had a gradient on some rank (one small allreduce, max).
  std::vector<float> used_anywhere() {
    std::vector<float> used(params.size());
    for (size_t k = 0; k < params.size(); ++k) used[k] = params[k].contributed ? 1.f : 0.f;
    comm().allreduce(make_buffer(used.data(), used.size()), ReduceOp::max);
    return used;
  }

  // The parameters reached from forward's outputs through the autograd graph.
  void trace(const std::vector<at::Tensor>& outputs) {
    std::unordered_set<const ::torch::autograd::Node*> seen;
    std::vector<::torch::autograd::Node*> todo;
    for (const at::Tensor& t : outputs)
      if (t.defined() && t.grad_fn()) todo.push_back(t.grad_fn().get());
    while (!todo.empty()) {
      ::torch::autograd::Node* n = todo.back();
      todo.pop_back();
      if (!seen.insert(n).second) continue;
      for (const auto& edge : n->next_edges())
        if (edge.function) todo.push_back(edge.function.get());
    }
    for (size_t k = 0; k < params.size(); ++k)
      if (seen.count(accumulators[k].get())) params[k].reached = true;
  }
};

Reducer::Reducer(::torch::nn::Module& module, Context& ctx, const DdpOptions& options)
    : impl_(std::make_unique<Impl>(ctx, options)) {
  if (options.bucket_cap_mb <= 0 || options.first_bucket_mb <= 0)
    throw std::invalid_argument(kWho + ": bucket_cap_mb and first_bucket_mb must be positive");
  impl_->build(module);
}

Reducer::~Reducer() {
  *impl_->self = nullptr;
  impl_->drain();
  auto& w = impl_->ctx.wrappers;
  w.erase(std::remove(w.begin(), w.end(), &impl_->registration), w.end());
}

void Reducer::before_forward() {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.running) throw std::logic_error(kWho + "::forward: called while a backward is running");
  if (d.next_launch > 0 || std::any_of(d.params.begin(), d.params.end(), [](const Impl::Param& p) { return p.ready; })) {
    d.drain();
    d.reset_backward();
    throw std::logic_error(kWho + "::forward: the previous backward stopped before its gradients were averaged "
                                  "(an exception inside backward?); zero the gradients and start the step again");
  }
  if (d.options.broadcast_buffers && d.sync && ::torch::GradMode::is_enabled() && d.comm().size() > 1) {
    ::torch::NoGradGuard no_grad;
    for (auto& [name, t] : d.buffers) d.broadcast_from_0(t);
  }
}

void Reducer::after_forward(const std::vector<at::Tensor>& outputs) {
  Impl& d = *impl_;
  if (!::torch::GradMode::is_enabled()) return;  // evaluation: no backward to synchronise
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.sync) {
    ++d.local_forwards;
    return;
  }
  if (d.options.find_unused_parameters) {
    if (outputs.empty())
      throw std::invalid_argument(kWho + "::forward: find_unused_parameters traces the graph from forward's tensors, "
                                         "and this module's forward returned none (return a tensor, a tuple or a "
                                         "vector of tensors)");
    d.trace(outputs);
  }
  d.armed = true;
  d.in_backward = true;
}

Context::Impl& Reducer::context() const { return impl_->ctx; }

void Reducer::reduce_to_owners(const std::function<int(const at::Tensor&)>& owner_of) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.in_backward) throw std::logic_error(kWho + ": gradients routed to their owners while a backward is due");
  if (d.options.gradient_as_bucket_view)
    throw std::logic_error(kWho + ": gradient_as_bucket_view with ZeroRedundancyOptimizer stage 2, which releases the "
                                  "gradients a rank does not own: construct the wrapper without it");
  std::vector<int> owner;
  for (const Impl::Param& p : d.params) {
    const int r = owner_of(p.tensor);
    if (r < 0 || r >= d.comm().size())
      throw std::invalid_argument(kWho + ": parameter '" + p.name + "' has no owner among the " +
                                  std::to_string(d.comm().size()) + " ranks");
    owner.push_back(r);
  }
  d.owner = std::move(owner);
}

bool Reducer::reduces_to_owners() const { return !impl_->owner.empty(); }

std::exception_ptr Reducer::take_comm_failure() { return std::exchange(impl_->comm_failure, nullptr); }

void Reducer::abandon_backward() {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  d.comm_failure = nullptr;
  d.drain();
  for (Impl::Param& p : d.params) p.reached = false;
  d.armed = false;
  d.local_forwards = 0;
  d.reset_backward();
}

void Reducer::broadcast_state(int root) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.in_backward) throw std::logic_error(kWho + ": state broadcast while a backward is due");
  d.check_same_structure();  // a newcomer's module is checked here, not at its construction
  // The root's bucket layout too: a member that did not finish the step that rebuilt the
  // buckets would otherwise reduce another layout than the others (wrong sums, no error).
  int64_t root_rebuilt = d.rebuilt ? 1 : 0;
  if (d.comm().size() > 1) d.comm().broadcast(make_buffer(&root_rebuilt, 1), root);
  const std::vector<size_t> order = d.agree_on(d.layout(), root);
  if (order != d.layout()) d.relayout(order);
  d.rebuilt = root_rebuilt != 0;
  d.arrival.clear();  // a backward after this collects afresh where the buckets are not rebuilt yet
  ::torch::NoGradGuard no_grad;
  for (Impl::Param& p : d.params) d.broadcast_from(p.tensor, root);
  for (auto& [name, t] : d.buffers) d.broadcast_from(t, root);
}

void Reducer::set_sync(bool on) { impl_->sync = on; }
bool Reducer::sync() const { return impl_->sync; }
DdpStats Reducer::last_stats() const { return impl_->stats; }

}  // namespace dpt::torch
