// dpt::torch::ZeroRedundancyOptimizer (dpt/torch/zero.h).
#include "dpt/torch/zero.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/context_impl.h"
#include "bindings/libtorch/tensor_comm.h"
#include "device/safe_file.h"

namespace dpt::torch {
namespace {

const std::string kWho = "dpt::torch::ZeroRedundancyOptimizer";

// Contiguous runs of the parameter list of about equal size: parameter k goes to the
// rank whose equal share holds its middle element.
std::vector<int> cut_shards(const std::vector<at::Tensor>& params, int world) {
  double total = 0;
  for (const at::Tensor& p : params) total += double(p.numel());
  std::vector<int> owner;
  double before = 0;
  for (const at::Tensor& p : params) {
    const double middle = before + double(p.numel()) / 2;
    owner.push_back(total > 0 ? std::min(world - 1, int(middle * world / total)) : 0);
    before += double(p.numel());
  }
  return owner;
}

int64_t tensor_bytes(const at::Tensor& t) { return t.defined() ? t.numel() * int64_t(t.element_size()) : 0; }

// The tensors of one parameter's optimizer state, for torch::optim's optimizers; another
// optimizer's state counts as the bytes it serialises to.
int64_t state_tensor_bytes(const ::torch::optim::OptimizerParamState& s) {
  namespace o = ::torch::optim;
  if (auto* a = dynamic_cast<const o::AdamParamState*>(&s))
    return tensor_bytes(a->exp_avg()) + tensor_bytes(a->exp_avg_sq()) + tensor_bytes(a->max_exp_avg_sq());
  if (auto* a = dynamic_cast<const o::AdamWParamState*>(&s))
    return tensor_bytes(a->exp_avg()) + tensor_bytes(a->exp_avg_sq()) + tensor_bytes(a->max_exp_avg_sq());
  if (auto* m = dynamic_cast<const o::SGDParamState*>(&s)) return tensor_bytes(m->momentum_buffer());
  if (auto* r = dynamic_cast<const o::RMSpropParamState*>(&s))
    return tensor_bytes(r->square_avg()) + tensor_bytes(r->momentum_buffer()) + tensor_bytes(r->grad_avg());
  if (auto* g = dynamic_cast<const o::AdagradParamState*>(&s)) return tensor_bytes(g->sum());
  ::torch::serialize::OutputArchive archive;
  s.serialize(archive);
  std::ostringstream out;
  archive.save_to(out);
  return static_cast<int64_t>(out.str().size());
}

std::string shard_file(const std::string& dir, int rank) { return dir + "/optim.rank" + std::to_string(rank) + ".pt"; }

}  // namespace

struct ZeroRedundancyOptimizer::Impl {
  Context::Impl& ctx;
  std::vector<at::Tensor> params;
  Factory factory;
  int stage = 1;
  std::vector<int> owner;
  std::vector<at::Tensor> shard;
  std::unique_ptr<::torch::optim::Optimizer> optimizer;

  Impl(Context::Impl& c, std::vector<at::Tensor> p, Factory f, int s)
      : ctx(c), params(std::move(p)), factory(std::move(f)), stage(s) {
    if (!factory) throw std::invalid_argument(kWho + ": the optimizer factory is empty");
    if (ctx.elastic)
      throw std::logic_error(kWho + ": the context is elastic (InitOptions::elastic), and a shard lives on one rank "
                                    "only: dpt::torch::ElasticLoop does not rebuild a dead rank's shard yet; use a "
                                    "torch::optim optimizer over all the parameters, or a fixed-size job");
    if (stage != 1 && stage != 2)
      throw std::invalid_argument(kWho + ": stage " + std::to_string(stage) + " (1: optimizer state, 2: + gradients)");
    for (size_t k = 0; k < params.size(); ++k) check_dense(params[k], kWho + ": parameter " + std::to_string(k));
    owner = cut_shards(params, comm().size());
    for (size_t k = 0; k < params.size(); ++k)
      if (owner[k] == comm().rank()) shard.push_back(params[k]);
    optimizer = factory(shard);
    if (!optimizer) throw std::invalid_argument(kWho + ": the optimizer factory returned null");
  }

  Communicator& comm() { return *ctx.comm; }

  int owner_of(const at::Tensor& t) const {
    for (size_t k = 0; k < params.size(); ++k)
      if (params[k].unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return owner[k];
    return -1;
  }

  // Every rank's updated shard to everyone: per owner, its parameters flattened per
  // dtype and broadcast from it.
  void share_shards() {
    ::torch::NoGradGuard no_grad;
    for (int r = 0; r < comm().size(); ++r) {
      std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
      for (size_t k = 0; k < params.size(); ++k)
        if (owner[k] == r) by_dtype[params[k].scalar_type()].push_back(params[k]);
      for (auto& [dtype, ts] : by_dtype) {
        std::vector<at::Tensor> flat_views;
        for (const at::Tensor& t : ts) flat_views.push_back(t.reshape({-1}));
        at::Tensor flat = at::cat(flat_views);
        comm().broadcast(whole(flat), r);
        if (r == comm().rank()) continue;
        int64_t at = 0;
        for (at::Tensor& t : ts) {
          t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
          at += t.numel();
        }
      }
    }
  }
};

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<at::Tensor> params, Factory factory, Context& ctx)
    : impl_(std::make_unique<Impl>(ctx.impl(), std::move(params), std::move(factory), 1)) {}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(Reducer& reducer, std::vector<at::Tensor> params, Factory factory,
                                                 const ZeroOptions& options)
    : impl_(std::make_unique<Impl>(reducer.context(), std::move(params), std::move(factory), options.stage)) {
  if (impl_->stage == 2) {
    Impl* d = impl_.get();
    reducer.reduce_to_owners([d](const at::Tensor& t) { return d->owner_of(t); });
  }
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() = default;

void ZeroRedundancyOptimizer::zero_grad() {
  for (at::Tensor& p : impl_->params) p.mutable_grad().reset();
}

void ZeroRedundancyOptimizer::step() {
  for (const at::Tensor& p : impl_->shard)
    if (p.requires_grad() && !p.grad().defined())
      throw std::logic_error(kWho + "::step: a parameter of this rank's shard has no gradient (no backward since "
                                    "zero_grad, or a parameter no rank used)");
  impl_->optimizer->step();
  impl_->share_shards();
}

void ZeroRedundancyOptimizer::save(const std::string& dir) const {
  Impl& d = *impl_;
  std::filesystem::create_directories(dir);
  ::torch::save(*d.optimizer, shard_file(dir, d.comm().rank()));
  if (d.comm().rank() == 0) {
    nlohmann::json meta = {{"world_size", d.comm().size()}, {"parameters", d.params.size()}, {"owner", d.owner}};
    write_file_atomically(dir + "/optim.json", meta.dump() + "\n");  // 0600, whole (device/safe_file.h)
  }
  d.comm().barrier();  // every file is written when any rank returns
}

void ZeroRedundancyOptimizer::load(const std::string& dir) {
  Impl& d = *impl_;
  std::ifstream in(dir + "/optim.json");
  if (!in) throw std::runtime_error(kWho + "::load: no " + dir + "/optim.json (written by save)");
  const nlohmann::json meta = nlohmann::json::parse(in);
  const std::vector<int> old_owner = meta.at("owner").get<std::vector<int>>();
  if (old_owner.size() != d.params.size())
    throw std::runtime_error(kWho + "::load: " + dir + " holds the state of " + std::to_string(old_owner.size()) +
                             " parameters, this optimizer has " + std::to_string(d.params.size()));
  // The old shards this rank's new one overlaps: each rebuilt over the same parameters as
  // when saved, loaded by PyTorch's own code, its states moved to this rank's optimizer.
  auto& mine = d.optimizer->state();
  for (int r = 0; r < meta.at("world_size").get<int>(); ++r) {
    std::vector<at::Tensor> old_shard;
    bool overlaps = false;
    for (size_t k = 0; k < d.params.size(); ++k) {
      if (old_owner[k] != r) continue;
      old_shard.push_back(d.params[k]);
      overlaps = overlaps || d.owner[k] == d.comm().rank();
    }
    if (!overlaps && !(r == 0 && d.shard.empty())) continue;
    std::unique_ptr<::torch::optim::Optimizer> old = d.factory(old_shard);
    ::torch::load(*old, shard_file(dir, r));
    for (size_t k = 0; k < d.params.size(); ++k) {
      if (old_owner[k] != r || d.owner[k] != d.comm().rank()) continue;
      auto it = old->state().find(d.params[k].unsafeGetTensorImpl());
      if (it != old->state().end()) mine[d.params[k].unsafeGetTensorImpl()] = it->second->clone();
    }
    // The hyper-parameters (a scheduler's learning rate) as saved.
    if (!old->param_groups().empty())
      for (auto& group : d.optimizer->param_groups()) group.set_options(old->param_groups().front().options().clone());
  }
}

::torch::optim::Optimizer& ZeroRedundancyOptimizer::shard_optimizer() { return *impl_->optimizer; }
int ZeroRedundancyOptimizer::owner_of(size_t k) const {
  if (k >= impl_->owner.size())
    throw std::out_of_range(kWho + "::owner_of: parameter " + std::to_string(k) + " of " +
                            std::to_string(impl_->owner.size()));
  return impl_->owner[k];
}
size_t ZeroRedundancyOptimizer::shard_size() const { return impl_->shard.size(); }
int ZeroRedundancyOptimizer::stage() const { return impl_->stage; }

int64_t ZeroRedundancyOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& entry : impl_->optimizer->state()) bytes += state_tensor_bytes(*entry.second);
  return bytes;
}

}  // namespace dpt::torch
