#include "parallel/zero/zero_strategy.h"

#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>

#include "comm/store/elastic_membership.h"
#include "device/runtime.h"
#include "models/kernels/cpu/page_memory.h"
#include "optim/clip_grad.h"
#include "parallel/optimizer_shards.h"
#include "parallel/precision/wire16.h"

namespace dpt {

ZeroStrategy::ZeroStrategy(Module& model, Communicator& comm, const StrategyConfig& config,
                           const OptimizerFactory& make_optimizer)
    : ParallelStrategy(model, comm), stage_(config.zero_stage), layout_(model.num_params(), comm.size()) {
  if (stage_ < 1 || stage_ > 3) throw std::invalid_argument("ZeRO: stage " + std::to_string(stage_) + " (valid: 1, 2, 3)");
  if (config.ddp.powersgd.rank != 0)
    throw std::invalid_argument("--grad-compress powersgd works with DDP only (--zero 0), not with --zero " + std::to_string(stage_) +
                                ": ZeRO reduces each gradient to its shard's owner, not a low-rank allreduce");
  optimizer_ = make_optimizer(layout_.shard);
  if (config.ddp.optimizer_on_device) {
    // Checked here as well as by the trainer's flags: a library caller gets the same words.
    const auto refuse = [&](const std::string& why) {
      throw std::invalid_argument("ZeRO-" + std::to_string(stage_) + ": --optimizer-device cuda " + why);
    };
    if (stage_ == 3)
      refuse("works at stages 1 and 2: stage 3 gathers its parameters into host memory (its device side is not built)");
    if (!model.on_cuda()) refuse("needs the model on CUDA (--device cuda)");
    if (!optimizer_->has_device_step()) refuse("needs an optimizer with a device step, not " + optimizer_->name());
    if (config.ddp.wire != DType::f32) refuse("reduces fp32 device buckets: not with --grad-compress bf16/fp16");
    on_device_ = true;
  }
  // Device-resident keeps fp32 masters on the device (autocast's arrangement, as DDP's).
  if (config.precision != DType::f32 && !on_device_) master_ = std::make_unique<MasterWeights>(config.precision);
  // Fails early (length_error) if the world is larger than ParamStore's slack allows.
  model_.store().padded_params(layout_.padded());
  const ParamStore& store = model_.store();
  if (store.sharded()) {
    // A model built sharded holds only one shard: it must be this rank's, by our cut.
    const int r = comm.rank();
    const std::pair<size_t, size_t> mine{std::min(layout_.begin(r), layout_.numel), std::min(layout_.end(r), layout_.numel)};
    if (stage_ != 3 || store.resident_range() != mine)
      throw std::logic_error("ZeRO-" + std::to_string(stage_) + ": the model was built keeping elements [" +
                             std::to_string(store.resident_range().first) + ", " +
                             std::to_string(store.resident_range().second) + ") resident, but rank " +
                             std::to_string(r) + " of " + std::to_string(comm.size()) + " under ZeRO-3 owns [" +
                             std::to_string(mine.first) + ", " + std::to_string(mine.second) + ")");
  }
  if (on_device_) {
    optimizer_->to_device();
    model.store().set_device_resident(true);
  }
  if (stage_ == 1) {
    allreduce_ = std::make_unique<GradAllreduce>(model_, comm, config.ddp);
  } else {
    grad_shard_.assign(layout_.shard, 0.0f);
    // The full gradient buffer starts released: only buckets in flight become resident.
    auto g = model_.flat_grads();
    release_slice(g.data(), g.data() + g.size());
    if (on_device_) {
      device_grad_shard_.reserve(layout_.shard);
      device::zero_on_kernel_stream(device_grad_shard_.data(), layout_.shard * sizeof(float));
    }
    reducer_ = std::make_unique<ZeroGradReducer>(model_, comm, layout_, config.ddp, std::span<float>(grad_shard_),
                                                 on_device_ ? device_grad_shard_.data() : nullptr);
    if (stage_ == 3)
      gatherer_ = std::make_unique<ZeroParamGatherer>(model_, comm, layout_, config.ddp.overlap, config.precision);
  }
  // Pieces as large as a gradient bucket: --bucket-mb sets both granularities.
  if (stage_ <= 2 && config.ddp.overlap && !on_device_)
    refresher_ = std::make_unique<ZeroParamRefresher>(model_, comm, layout_, config.ddp.bucket_bytes, config.precision);
}

ZeroStrategy::~ZeroStrategy() {
  // A parameter refresh may still be in flight: let it land while its communicator
  // (possibly one the trainer owns and destroys right after) is alive.
  try {
    settle();
  } catch (const std::exception&) {
    // The communicator failed; its error was reported where it happened.
  }
}

std::span<float> ZeroStrategy::param_shard() {
  return model_.store().padded_params(layout_.padded()).subspan(layout_.begin(comm_->rank()), layout_.shard);
}

std::span<float> ZeroStrategy::grad_shard() {
  if (stage_ >= 2) {
    // Device-resident: a host view for reading (refreshed from the device shard).
    if (on_device_) device::copy(grad_shard_.data(), device_grad_shard_.data(), layout_.shard * sizeof(float));
    return grad_shard_;
  }
  return model_.store().padded_grads(layout_.padded()).subspan(layout_.begin(comm_->rank()), layout_.shard);
}

OptimizerRange ZeroStrategy::optimizer_range() const {
  const int r = comm_->rank();
  return {std::min(layout_.begin(r), layout_.numel), layout_.real_numel(r)};
}

void ZeroStrategy::broadcast_parameters() {
  settle();
  // A sharded build holds no rank's whole model to broadcast: the ranks prove they
  // built the same one instead (every parameter's CRC, param_store.h).
  if (model_.store().sharded()) verify_same_parameters(*comm_, model_.store().fingerprint(), "ZeRO-3");
  else broadcast_verified(*comm_, model_.flat_params(), "ZeRO");
  // Every rank holds rank 0's full-precision values: the own shard becomes the master
  // and all are rounded alike (stage 3 then keeps only its own shard, so only that
  // needs rounding).
  if (master_) {
    master_->adopt(param_shard());
    master_->round_working(gatherer_ ? param_shard() : model_.flat_params());
  }
  if (gatherer_) gatherer_->release_all();
}

void ZeroStrategy::set_communicator(Communicator& comm) {
  if (comm.size() != comm_->size()) throw std::invalid_argument("ZeRO: the new communicator has another world size");
  if (allreduce_) allreduce_->set_communicator(comm);
  else reducer_->set_communicator(comm);
  if (gatherer_) gatherer_->set_communicator(comm);
  if (refresher_) refresher_->set_communicator(comm);
  comm_ = &comm;
}

void ZeroStrategy::zero_grad() {
  // Stages 2 and 3 leave the host buffer zero and released after every step
  // (zero_grad_reducer.h); touching it would make every page resident again.
  // Device-resident: Module::zero_grad zeroes the device gradients only.
  if (stage_ == 1 || on_device_) model_.zero_grad();
  else model_.zero_device_grad();  // ... but the CUDA mirror is not zero
}

void ZeroStrategy::begin_backward(bool sync) {
  // The first micro-step of a step: gathers since the last step (evaluation) are not its.
  if (gatherer_ && !in_step_) gatherer_->take_bytes();
  in_step_ = true;
  if (allreduce_) allreduce_->begin_backward(sync);
  else reducer_->begin_backward(sync);
}

void ZeroStrategy::end_backward() {
  if (allreduce_) {
    stats_ = allreduce_->end_backward();
  } else {
    stats_ = reducer_->end_backward();
    if (gatherer_) stats_.bytes += gatherer_->take_bytes();  // this step's forward and backward gathers
  }
  if (refresher_) {  // the previous step's refresh, which ran during this forward
    stats_.comm_s += refresher_->take_comm_s();
    stats_.exposed_s += refresher_->take_exposed_s();
  }
}

void ZeroStrategy::clip_grad_norm(float max_norm) {
  if (on_device_) return clip_grad_norm_on_device(max_norm);
  // Padding gradients are zero, so the shards' squares sum to the full buffer's.
  double sq = squared_norm(grad_shard());
  comm_->allreduce(Buffer{&sq, 1, DType::f64, {}}, ReduceOp::sum);
  dpt::clip_grad_norm(grad_shard(), max_norm, sq);
}

void ZeroStrategy::step(float lr) {
  in_step_ = false;
  if (on_device_) return step_on_device(lr);
  if (master_) master_->step(*optimizer_, param_shard(), grad_shard(), lr);
  else optimizer_->step(param_shard(), grad_shard(), lr);
  if (gatherer_) return;  // stage 3: layers gather what they need when they run
  if (refresher_) {
    stats_.bytes += refresher_->launch();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const DType wire = master_ ? master_->working_dtype() : DType::f32;
  allgather_parameters(wire);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.comm_s += dt;
  stats_.exposed_s += dt;
  stats_.bytes += int64_t(layout_.padded() * dtype_size(wire));
}

void ZeroStrategy::allgather_parameters(DType wire) {
  auto all = model_.store().padded_params(layout_.padded());
  const auto mine = param_shard();
  if (wire == DType::f32) {
    comm_->allgather(Buffer{mine.data(), mine.size(), DType::f32, {}}, Buffer{all.data(), all.size(), DType::f32, {}});
    return;
  }
  wire_shard_.resize(mine.size());
  pack16(wire, mine.data(), wire_shard_.data(), mine.size());
  // The 16-bit result fills the first half of the buffer's bytes (wire16.h).
  comm_->allgather(Buffer{wire_shard_.data(), mine.size(), wire, {}}, Buffer{all.data(), all.size(), wire, {}});
  widen16_in_place(wire, all.data(), all.size());
}

void ZeroStrategy::settle() {
  if (refresher_) refresher_->settle();
}

void ZeroStrategy::expose_full_parameters() {
  settle();
  if (master_) master_->expose(param_shard());
  if (gatherer_) gatherer_->gather_all();
  else if (master_) allgather_parameters(DType::f32);
}

void ZeroStrategy::expose_full_parameters_on(int root) {
  if (!gatherer_) return expose_full_parameters();
  settle();
  if (master_) master_->expose(param_shard());
  gatherer_->gather_all_to(root);
}

void ZeroStrategy::restore_working_parameters() {
  if (gatherer_) gatherer_->release_all();
  if (!master_) return;
  // Rounding the exposed masters gives exactly the working values back.
  if (gatherer_) master_->round_working(param_shard());
  else master_->round_working(model_.store().padded_params(layout_.padded()));
}

void ZeroStrategy::save_optimizer_state(const std::string& model_path) {
  save_optimizer_shard(model_path, *optimizer_, layout_, comm_->rank());
}

ModelStateBytes ZeroStrategy::memory_bytes() const {
  ModelStateBytes m;
  m.stage = stage_;
  m.world = comm_->size();
  m.numel = model_.num_params();
  ParamStore& store = model_.store();
  m.params = m.params_allocated = store.param_bytes();
  m.grads = m.grads_allocated = store.grad_bytes();
  count_optimizer_state(m, master_ ? master_->bytes() : 0);
  m.comm = allreduce_ ? allreduce_->comm_buffer_bytes() : 0;
  if (stage_ == 3) {
    // Only the own shard is resident between layers: count pages, not allocation.
    auto p = store.padded_params(model_.num_params() + ParamStore::kShardSlack);
    m.params = resident_bytes(p.data(), p.size_bytes());
    m.params_allocated = p.size_bytes();
    m.gathered_peak = gatherer_->peak_gathered_bytes();
  }
  if (stage_ >= 2) {
    // The flat buffer's pages are released between buckets: count what is resident.
    auto g = store.padded_grads(model_.num_params() + ParamStore::kShardSlack);
    const size_t shard_bytes = grad_shard_.capacity() * sizeof(float);
    m.grads = shard_bytes + resident_bytes(g.data(), g.size_bytes());
    m.grads_allocated = shard_bytes + g.size_bytes();
  }
  return m;
}

// ---- elastic ----

void ZeroStrategy::elastic_snapshot(const ElasticProgress& at, int generation, int replicas) {
  settle();  // the parameters must be this step's everywhere
  ShardState own;
  const auto p = param_shard();
  // The masters under mixed precision: the working values are their rounding.
  if (master_) own.params.assign(master_->values().begin(), master_->values().end());
  else own.params.assign(p.begin(), p.end());
  for (auto& [name, span] : optimizer_->state_buffers()) own.optimizer.emplace_back(name, std::vector<float>(span.begin(), span.end()));
  own.optimizer_steps = optimizer_->step_count();
  auto snap = std::make_shared<ZeroSnapshot>(exchange_snapshot(*comm_, layout_, std::move(own), at.step, at.epoch, at.position,
                                                                   generation, replicas));
  previous_ = std::move(committed_);
  committed_ = std::move(snap);
}

namespace {
// ZeRO's carried state: its last two committed snapshots (zero_elastic_snapshot.h).
struct ZeroCarried : CarriedState {
  std::shared_ptr<const ZeroSnapshot> snapshot, previous;
};
}  // namespace

CarriedStatePtr ZeroStrategy::carry_out() {
  auto s = std::make_shared<ZeroCarried>();
  s->snapshot = committed_;
  s->previous = previous_;
  return s;
}

void ZeroStrategy::carry_in(const CarriedStatePtr& state) {
  const auto* carried = dynamic_cast<const ZeroCarried*>(state.get());
  if (!carried) throw std::logic_error(name() + ": the carried state is not ZeRO's (another strategy's, or none)");
  committed_ = carried->snapshot;
  previous_ = carried->previous;
}

ElasticProgress ZeroStrategy::adopt_group_state(const GroupChange& change) {
  // The survivors' snapshots (a newcomer has none); the members agree on one and
  // assemble it (zero_elastic_snapshot.h).
  std::vector<const ZeroSnapshot*> held;
  if (change.mine.step >= 0 && committed_) held = {committed_.get(), previous_.get()};
  std::vector<std::string> names;
  for (auto& [name, span] : optimizer_->state_buffers()) names.push_back(name);
  RestoredState full = restore_from_snapshots(*comm_, held, model_.num_params(), names);
  // Every rank now holds the whole state of the snapshot's step: take the model, cut the own shard.
  auto params = model_.flat_params();
  std::copy(full.params.begin(), full.params.end(), params.begin());
  const size_t b = std::min(layout_.begin(comm_->rank()), layout_.numel), n = layout_.real_numel(comm_->rank());
  for (auto& [name, span] : optimizer_->state_buffers())
    for (auto& [fname, values] : full.optimizer)
      if (fname == name) {
        std::fill(span.begin(), span.end(), 0.0f);
        std::copy(values.begin() + ptrdiff_t(b), values.begin() + ptrdiff_t(b + n), span.begin());
      }
  optimizer_->set_step_count(full.optimizer_steps);
  if (master_) {
    master_->adopt(param_shard());
    master_->round_working(model_.flat_params());
  }
  if (gatherer_) gatherer_->release_all();
  return {full.step, full.epoch, full.position};
}

}  // namespace dpt
