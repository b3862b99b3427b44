// The data-parallel wrappers of dpt/parallel.h over the trainer's strategies
// (parallel/: DDP, ZeRO 1/2/3, DiLoCo), with the checks that make misuse an error.
#include <algorithm>
#include <stdexcept>

#include "api/context_impl.h"
#include "api/deferred_optimizer.h"
#include "api/model_impl.h"
#include "api/parameter_owner.h"
#include "dpt/parallel.h"
#include "parallel/parallel_strategy.h"
#include "train/make_strategy.h"

namespace dpt {
namespace {

// Names and shapes of every parameter and buffer: what must be equal on every rank.
std::string structure_of(const Module& m) {
  std::string s;
  for (const ParamInfo& p : m.param_infos()) s += p.name + " " + shape_to_string(p.shape) + "; ";
  for (const BufferInfo& b : m.buffer_infos()) s += "buffer " + b.name + " " + shape_to_string(b.shape) + "; ";
  return s;
}

// The first entry where two structure texts differ, for the error.
std::string first_difference(const std::string& a, const std::string& b, size_t rank) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t start = a.rfind("; ", i) == std::string::npos ? 0 : a.rfind("; ", i) + 2;
  auto entry = [&](const std::string& s) {
    if (start >= s.size()) return std::string("(nothing: fewer entries)");
    const size_t end = s.find("; ", start);
    return s.substr(start, end == std::string::npos ? std::string::npos : end - start);
  };
  return "rank 0 has '" + entry(a) + "' where rank " + std::to_string(rank) + " has '" + entry(b) + "'";
}

// "f32", "bf16" or "f16" (comm/types.h's dtype names), refused otherwise naming the caller.
DType wire_dtype(const std::string& s, const char* who) {
  for (DType d : {DType::f32, DType::bf16, DType::f16})
    if (s == dtype_name(d)) return d;
  throw std::invalid_argument(std::string(who) + ": dtype '" + s + "': valid are f32, bf16, f16");
}

size_t mib(double mb, const char* who, const char* field) {
  if (!(mb > 0)) throw std::invalid_argument(std::string(who) + ": " + field + " " + std::to_string(mb) + " (must be > 0)");
  return size_t(mb * 1024 * 1024);
}

}  // namespace

struct DataParallel::Impl : ParameterSet::Owner {
  std::string name;  // "dpt::DistributedDataParallel"
  StrategyConfig config;
  bool broadcast_buffers = true;
  nn::Model::Impl* model = nullptr;
  Context::Impl* ctx = nullptr;
  DeferredOptimizer* optimizer = nullptr;  // owned by the strategy
  std::unique_ptr<ParallelStrategy> strategy;
  Context::Impl::Wrapper registration;
  bool in_backward = false;      // a training forward waits for its backward
  bool forward_syncs = false;    // that forward's backward averages
  int no_sync_depth = 0;
  bool buffers_due = true;       // PyTorch's require_forward_param_sync
  bool backward_since_step = false, last_backward_synced = false, parameters_checked = false;

  ~Impl() override {
    if (ctx) {
      auto& w = ctx->wrappers;
      w.erase(std::remove(w.begin(), w.end(), &registration), w.end());
    }
    if (model) {
      model->wrapped_by.clear();
      model->before_read = nullptr;
    }
  }

  void attach_optimizer(const std::string& opt, const OptimizerConfig& c, const std::string& who) override {
    if (optimizer->attached()) throw std::logic_error(who + ": " + name + " has an optimizer already");
    optimizer->set(make_optimizer(opt, c, optimizer->numel()));
  }
  void zero_grad() override { strategy->zero_grad(); }
  int64_t step_count() const override { return optimizer->step_count(); }

  void step(float lr, const std::string& who) override {
    if (in_backward)
      throw std::logic_error(who + ": " + name + "'s last training forward has had no backward() yet");
    if (!backward_since_step)
      throw std::logic_error(who + ": no " + name + "::backward() since the last step (stepping twice?): the "
                             "gradients were applied already");
    if (!last_backward_synced)
      throw std::logic_error(who + ": the last " + name + "::backward() ran inside no_sync(): its gradients are this "
                             "rank's own, never averaged over the ranks; run the last micro-batch's backward outside "
                             "no_sync() before stepping");
    // Once: the parameters are still rank 0's everywhere (the constructor made them so;
    // a checkpoint loaded on some ranks only after wrapping breaks it). ZeRO-3 holds shards.
    if (!parameters_checked && config.zero_stage != 3) {
      const std::string bad = ranks_with_other_values(*ctx->comm, model->module->flat_params());
      if (!bad.empty())
        throw std::runtime_error(who + ": the parameters of rank(s) " + bad + " differ from rank 0's: they changed "
                                 "after " + name + " made them equal (a checkpoint loaded on some ranks only? load "
                                 "it on every rank, or before wrapping)");
      parameters_checked = true;
    }
    strategy->step(lr);
    backward_since_step = false;
    last_backward_synced = false;
  }
};

DataParallel::DataParallel(nn::Model& model, Context& ctx, std::unique_ptr<Impl> impl)
    : model_(model), ctx_(ctx), impl_(std::move(impl)) {
  Impl& d = *impl_;
  nn::Model::Impl& m = model.impl();
  const std::string& who = d.name;
  if (!m.wrapped_by.empty()) throw std::logic_error(who + ": the model is wrapped by " + m.wrapped_by + " already");
  if (m.optimizer)
    throw std::logic_error(who + ": the model has an optimizer of its own: make the optimizer over the wrapper's "
                           "parameters() instead");
  d.model = &m;
  d.ctx = &ctx.impl();
  Communicator& comm = *d.ctx->comm;
  // Every rank built the same model (names and shapes), said with the rank that differs.
  const std::string mine = structure_of(*m.module);
  const std::vector<std::string> all = comm.allgather_bytes(mine);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw std::runtime_error(who + ": rank " + std::to_string(r) + " built a different model from rank 0's: " +
                               first_difference(all[0], all[r], r));
  d.strategy = make_strategy(d.config, *m.module, comm, [&d](size_t numel) {
    auto o = std::make_unique<DeferredOptimizer>(numel);
    d.optimizer = o.get();
    return o;
  });
  d.strategy->broadcast_parameters();
  d.strategy->broadcast_buffers();
  m.wrapped_by = who;
  m.before_read = [&d](const char* reader) {
    if (d.config.zero_stage == 3)
      throw std::logic_error(std::string(reader) + ": under ZeRO-3 each rank holds a shard of the parameters; " +
                             "read them whole through the wrapper's checkpoint (not yet offered) or use stage 1 or 2");
    if (d.config.zero_stage > 0) d.strategy->settle();  // DiLoCo's settle is a round's end: not for a read
  };
  d.registration = {who, d.strategy.get(), &d.in_backward};
  d.ctx->wrappers.push_back(&d.registration);
}

// Communication still in flight ends before the communicator may go (ZeRO's parameter
// allgather; DiLoCo: the outer step of an unfinished round, so every worker ends equal,
// as the trainer's last step does). A destructor cannot throw: a failure there was the
// job's failure already, seen by the call that started it.
DataParallel::~DataParallel() {
  try {
    if (impl_ && impl_->strategy) impl_->strategy->settle();
  } catch (const std::exception&) {
  }
}

const nn::Tensor& DataParallel::forward(const nn::Tensor& x) {
  Impl& d = *impl_;
  const std::string who = d.name + "::forward";
  if (d.in_backward)
    throw std::logic_error(who + ": the previous training forward has had no backward(); call backward(loss) first "
                           "(or eval() for forwards without one)");
  if (!d.model->training) {
    if (d.broadcast_buffers && d.buffers_due) d.strategy->broadcast_buffers();
    d.buffers_due = false;
    return d.model->run_forward(x, false, who.c_str());
  }
  const bool sync = d.no_sync_depth == 0;
  d.strategy->begin_backward(sync);
  if (d.broadcast_buffers && d.buffers_due) d.strategy->broadcast_buffers();
  d.buffers_due = sync;
  d.in_backward = true;
  d.forward_syncs = sync;
  return d.model->run_forward(x, true, who.c_str());
}

void DataParallel::backward(const nn::Loss& loss) {
  Impl& d = *impl_;
  const std::string who = d.name + "::backward";
  if (!d.in_backward)
    throw std::logic_error(who + ": no training forward() of this wrapper since the last backward()");
  d.model->run_backward(loss, who.c_str());
  d.in_backward = false;
  if (d.forward_syncs) d.strategy->end_backward();
  d.backward_since_step = true;
  d.last_backward_synced = d.forward_syncs;
}

DataParallel::NoSync DataParallel::no_sync() {
  ++impl_->no_sync_depth;
  return NoSync(this);
}
DataParallel::NoSync::~NoSync() {
  if (owner_) --owner_->impl_->no_sync_depth;
}

ParameterSet DataParallel::parameters() { return ParameterSet(impl_.get()); }
std::string DataParallel::strategy() const { return impl_->strategy->name(); }

namespace {
std::unique_ptr<DataParallel::Impl> make_impl(std::string name, StrategyConfig config, bool broadcast_buffers) {
  auto d = std::make_unique<DataParallel::Impl>();
  d->name = std::move(name);
  d->config = config;
  d->broadcast_buffers = broadcast_buffers;
  return d;
}
}  // namespace

DistributedDataParallel::DistributedDataParallel(nn::Model& model, Context& ctx, const DdpOptions& o)
    : DataParallel(model, ctx, [&] {
        const char* who = "dpt::DistributedDataParallel";
        StrategyConfig c;
        c.zero_stage = 0;
        c.ddp.bucket_bytes = mib(o.bucket_cap_mb, who, "bucket_cap_mb");
        c.ddp.first_bucket_bytes = mib(o.first_bucket_mb, who, "first_bucket_mb");
        c.ddp.overlap = o.overlap;
        c.ddp.wire = wire_dtype(o.gradient_dtype, who);
        return make_impl(who, c, o.broadcast_buffers);
      }()) {}

ZeroDataParallel::ZeroDataParallel(nn::Model& model, Context& ctx, const ZeroOptions& o)
    : DataParallel(model, ctx, [&] {
        const char* who = "dpt::ZeroDataParallel";
        if (o.stage < 1 || o.stage > 3)
          throw std::invalid_argument(std::string(who) + ": stage " + std::to_string(o.stage) + ": valid are 1, 2, 3");
        StrategyConfig c;
        c.zero_stage = o.stage;
        c.ddp.bucket_bytes = mib(o.bucket_cap_mb, who, "bucket_cap_mb");
        c.ddp.overlap = o.overlap;
        return make_impl(who, c, o.broadcast_buffers);
      }()) {}

DiLoCo::DiLoCo(nn::Model& model, Context& ctx, const DiLoCoOptions& o)
    : DataParallel(model, ctx, [&] {
        const char* who = "dpt::DiLoCo";
        if (o.inner_steps < 1)
          throw std::invalid_argument(std::string(who) + ": inner_steps " + std::to_string(o.inner_steps) +
                                      " (must be >= 1)");
        StrategyConfig c;
        c.diloco.inner_steps = o.inner_steps;
        c.diloco.outer_lr = o.outer_lr;
        c.diloco.outer_momentum = o.outer_momentum;
        c.diloco.group_size = o.group_size;
        c.diloco.overlap_steps = o.overlap_steps;
        c.diloco.outer_dtype = wire_dtype(o.outer_dtype, who);
        return make_impl(who, c, o.broadcast_buffers);
      }()) {}

}  // namespace dpt
