#include "parallel/ddp/ddp_strategy.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "comm/store/elastic_membership.h"
#include "device/runtime.h"
#include "models/io/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/cuda/device_steps.h"
#include "parallel/ddp/powersgd_checkpoint.h"
#include "parallel/precision/wire16.h"

namespace dpt {

DdpStrategy::DdpStrategy(Module& model, Communicator& comm, const StrategyConfig& config,
                         const OptimizerFactory& make_optimizer)
    : ParallelStrategy(model, comm), sync_(model, comm, config.ddp) {
  if (model.store().sharded())
    throw std::logic_error("DDP: the model was built sharded (only ZeRO-3 keeps a shard of the parameters)");
  optimizer_ = make_optimizer(model.num_params());
  if (config.ddp.optimizer_on_device) {
    // Checked here as well as by the trainer's flags: a library caller gets the same words.
    if (!model.on_cuda()) throw std::invalid_argument("DDP: --optimizer-device cuda needs the model on CUDA (--device cuda)");
    if (!optimizer_->has_device_step())
      throw std::invalid_argument("DDP: --optimizer-device cuda: optimizer " + optimizer_->name() + " has no device step");
    if (config.ddp.wire != DType::f32 || config.ddp.powersgd.rank != 0)
      throw std::invalid_argument("DDP: --optimizer-device cuda reduces fp32 device buckets: not with --grad-compress " +
                                  std::string(config.ddp.powersgd.rank ? "powersgd" : "bf16/fp16"));
    on_device_ = true;
    optimizer_->to_device();
    model.store().set_device_resident(true);
    // bf16 and fp16: the device parameters are fp32 masters and the gradients fp32, the
    // products round their operands (autocast's arrangement); fp16's loss scaler unscales
    // and checks on the device (unscale_owned_grads).
    return;
  }
  if (config.precision != DType::f32) master_ = std::make_unique<MasterWeights>(config.precision);
}

void DdpStrategy::broadcast_parameters() {
  broadcast_verified(*comm_, model_.flat_params(), "DDP");
  // Every rank holds rank 0's full-precision values: they become the master.
  if (master_) master_->adopt(model_.flat_params());
}

void DdpStrategy::set_communicator(Communicator& comm) {
  sync_.set_communicator(comm);
  comm_ = &comm;
}

void DdpStrategy::clip_grad_norm(float max_norm) {
  // Every rank holds the whole averaged gradient: the local norm is the global one.
  if (on_device_) {
    ParamStore& s = model_.store();
    const float total = float(std::sqrt(gpu::squared_norm(s.device_flat_grads(), s.total_numel())));
    const float coef = clip_coefficient(max_norm, total);
    if (coef != 1.0f) gpu::scale(s.device_flat_grads(), s.total_numel(), coef);
    s.device_grads_updated();
    return;
  }
  dpt::clip_grad_norm(model_.flat_grads(), max_norm);
}

bool DdpStrategy::unscale_owned_grads(float inv_scale) {
  if (!on_device_) return ParallelStrategy::unscale_owned_grads(inv_scale);
  ParamStore& s = model_.store();
  const bool found = gpu::scale_and_find_nonfinite(s.device_flat_grads(), s.total_numel(), inv_scale);
  s.device_grads_updated();
  return found;
}

void DdpStrategy::poison_owned_grad() {
  if (!on_device_) return ParallelStrategy::poison_owned_grad();
  ParamStore& s = model_.store();
  if (s.total_numel() == 0) return;
  const float inf = std::numeric_limits<float>::infinity();
  device::copy(s.device_flat_grads(), &inf, sizeof inf);  // ordered after backward's kernels (stream 0)
  s.device_grads_updated();
}

void DdpStrategy::step(float lr) {
  if (on_device_) {
    ParamStore& s = model_.store();
    s.sync_device_params();  // a host view handed out since the forward may have written
    optimizer_->step_on_device(s.device_flat_params(), s.device_flat_grads(), lr);
    s.device_params_updated();
    return;
  }
  if (master_) master_->step(*optimizer_, model_.flat_params(), model_.flat_grads(), lr);
  else optimizer_->step(model_.flat_params(), model_.flat_grads(), lr);
}

void DdpStrategy::expose_full_parameters() {
  if (master_) master_->expose(model_.flat_params());
}

void DdpStrategy::restore_working_parameters() {
  // Rounding the exposed masters gives exactly the working values back.
  if (master_) master_->round_working(model_.flat_params());
}

void DdpStrategy::save_optimizer_state(const std::string& model_path) {
  // PowerSGD's error feedback differs from rank to rank: each writes its own.
  save_powersgd_state(model_path, sync_.powersgd_buckets(), comm_->rank(), comm_->size());
  if (comm_->rank() != 0) return;  // the replicas are identical
  std::vector<NamedTensorView> state;
  for (auto& [name, span] : optimizer_->state_buffers()) state.push_back({name, {int64_t(span.size())}, span});
  save_safetensors(sidecar_path(model_path, "optim"), state,
                   {{"optimizer", optimizer_->name()}, {"step_count", std::to_string(optimizer_->step_count())}});
}

void DdpStrategy::load_optimizer_state(const std::string& model_path) {
  ParallelStrategy::load_optimizer_state(model_path);
  const std::string note = load_powersgd_state(model_path, sync_.powersgd_buckets(), comm_->rank(), comm_->size());
  if (!note.empty() && comm_->rank() == 0) std::printf("%s\n", note.c_str()), std::fflush(stdout);
}

namespace {
// DDP's carried state: every rank holds everything, so the optimizer state by name and
// its step count (the parameters stay in the model, at full precision: the masters are
// exposed before leaving).
struct DdpCarried : CarriedState {
  std::vector<std::pair<std::string, std::vector<float>>> optimizer;
  int64_t optimizer_steps = 0;
};
}  // namespace

CarriedStatePtr DdpStrategy::carry_out() {
  auto s = std::make_shared<DdpCarried>();
  expose_full_parameters();  // the masters travel in the model's buffer
  for (auto& [name, span] : optimizer_->state_buffers()) s->optimizer.emplace_back(name, std::vector<float>(span.begin(), span.end()));
  s->optimizer_steps = optimizer_->step_count();
  return s;
}

void DdpStrategy::carry_in(const CarriedStatePtr& state) {
  const auto* carried = dynamic_cast<const DdpCarried*>(state.get());
  if (!carried) throw std::logic_error("DDP: the carried state is not DDP's (another strategy's, or none)");
  for (auto& [name, span] : optimizer_->state_buffers())
    for (auto& [carried_name, values] : carried->optimizer)
      if (carried_name == name && values.size() == span.size()) std::copy(values.begin(), values.end(), span.begin());
  optimizer_->set_step_count(carried->optimizer_steps);
}

void DdpStrategy::adopt_state_from(int root) {
  // Full-precision parameters (carry_out exposed the masters), then every state buffer
  // and the step count, all from root; the masters are re-adopted from them.
  broadcast_verified(*comm_, model_.flat_params(), "DDP", root);
  for (auto& [name, span] : optimizer_->state_buffers())
    comm_->broadcast(Buffer{span.data(), span.size(), DType::f32, {}}, root);
  int64_t steps = optimizer_->step_count();
  comm_->broadcast(make_buffer(&steps, 1), root);
  optimizer_->set_step_count(steps);
  if (master_) master_->adopt(model_.flat_params());
}

ElasticProgress DdpStrategy::adopt_group_state(const GroupChange& change) {
  // Every member's progress; the source is the most advanced (lowest rank on a tie). A
  // survivor that finished the failed step holds it after that step: it counted every
  // rank's gradients, so the group goes on from there and nobody redoes it.
  const int n = comm_->size();
  int64_t mine[3] = {change.mine.step, int64_t(change.mine.epoch), int64_t(change.mine.position)};
  std::vector<int64_t> all(size_t(3 * n));
  comm_->allgather(make_buffer(mine, 3), make_buffer(all.data(), all.size()));
  int root = 0;
  for (int r = 1; r < n; ++r)
    if (all[size_t(3 * r)] > all[size_t(3 * root)]) root = r;
  if (all[size_t(3 * root)] < 0) throw ElasticError("elastic: no member of the new group holds any training state");
  adopt_state_from(root);
  return {all[size_t(3 * root)], int(all[size_t(3 * root + 1)]), size_t(all[size_t(3 * root + 2)])};
}

ModelStateBytes DdpStrategy::memory_bytes() const {
  ModelStateBytes m;
  m.stage = 0;
  m.world = comm_->size();
  m.numel = model_.num_params();
  m.params = m.params_allocated = model_.store().param_bytes();
  m.grads = m.grads_allocated = model_.store().grad_bytes();
  count_optimizer_state(m, master_ ? master_->bytes() : 0);
  m.comm = sync_.comm_buffer_bytes();
  return m;
}

}  // namespace dpt
