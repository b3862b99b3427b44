#include "parallel/diloco/diloco_strategy.h"
#include "comm/dispatch/flight_recorder.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace dpt {

namespace {
std::string dtype_word(DType t) { return t == DType::bf16 ? "bf16" : t == DType::f16 ? "fp16" : "fp32"; }
}  // namespace

DilocoStrategy::DilocoStrategy(Module& model, Communicator& comm, const StrategyConfig& config,
                               const OptimizerFactory& make_optimizer)
    : ParallelStrategy(model, comm), config_(config.diloco) {
  const DilocoConfig& d = config_;
  if (d.inner_steps < 1) throw std::invalid_argument("DiLoCo: --inner-steps " + std::to_string(d.inner_steps) + ": must be >= 1");
  if (d.overlap_steps < 0 || d.overlap_steps > d.inner_steps)
    throw std::invalid_argument("DiLoCo: --outer-overlap-steps " + std::to_string(d.overlap_steps) + ": must be in [0, H = " +
                                std::to_string(d.inner_steps) + "] (the exchange must land before the next round's begins)");
  if (!(d.outer_lr > 0)) throw std::invalid_argument("DiLoCo: --outer-lr must be > 0");
  if (d.outer_momentum < 0 || d.outer_momentum >= 1)
    throw std::invalid_argument("DiLoCo: --outer-momentum must be in [0, 1)");
  if (config.zero_stage != 0) throw std::invalid_argument("DiLoCo: the inner groups run DDP; not with --zero " + std::to_string(config.zero_stage));
  if (config.precision != DType::f32)
    throw std::invalid_argument("DiLoCo: the pseudo-gradient is taken of fp32 parameters; not with --precision bf16/fp16");
  if (config.ddp.optimizer_on_device) throw std::invalid_argument("DiLoCo: not with --optimizer-device cuda");
  if (model.store().sharded()) throw std::logic_error("DiLoCo: the model was built sharded");
  StrategyConfig inner = config;  // the inner groups run plain DDP
  inner.diloco = {};
  build_groups(comm);
  inner_ = std::make_unique<DdpStrategy>(model, *inner_comm_, inner, make_optimizer);
  exchange_ = std::make_unique<OuterExchange>(*inner_comm_, *outer_comm_, model.num_params(), config_);
}

std::string DilocoStrategy::name() const {
  return "DiLoCo(H=" + std::to_string(config_.inner_steps) + ", " + std::to_string(outer_comm_->size()) + " groups of " +
         std::to_string(inner_comm_->size()) + ", outer " + dtype_word(config_.outer_dtype) +
         (config_.overlap_steps ? ", overlap " + std::to_string(config_.overlap_steps) : std::string()) + ")";
}

void DilocoStrategy::build_groups(Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  int group = 0, index = 0, size = 0;
  if (config_.group_size == 0) {  // one host's ranks
    const Topology& t = comm.topology();
    size = t.uniform_local_size();
    if (size == 0)
      throw std::invalid_argument("DiLoCo: the hosts hold different numbers of ranks (" + t.describe() +
                                  "): inner groups must be equal; give --diloco-group N");
    group = t.my_host();
    index = t.local_rank();
  } else {
    size = config_.group_size;
    if (size < 1 || n % size != 0)
      throw std::invalid_argument("DiLoCo: --diloco-group " + std::to_string(size) + " does not divide the " +
                                  std::to_string(n) + " ranks into equal inner groups");
    group = r / size;
    index = r % size;
  }
  inner_comm_ = comm.split(group, index);
  outer_comm_ = comm.split(index, group);
}

void DilocoStrategy::broadcast_parameters() {
  if (resumed_worker_) {
    // Every worker resumes with its own parameters (load_optimizer_state); only theta is
    // shared, and it must be the same in every group: a checksum says so.
    resumed_worker_ = false;
    return;
  }
  broadcast_where_differs(*comm_, model_.flat_params(), "DiLoCo");
  // The buffers likewise (the same on every rank that built the model from one seed or
  // file): from here on the trainer's broadcast_buffers keeps each inner group's own.
  if (!model_.buffer_infos().empty()) broadcast_where_differs(*comm_, model_.flat_buffers(), "DiLoCo (buffers)");
  exchange_->reset_theta(model_.flat_params());
}

void DilocoStrategy::set_communicator(Communicator& comm) {
  // The backend switch: new splits over the new communicator; an exchange in flight on
  // the old one lands first.
  exchange_->wait_average();
  comm_ = &comm;
  build_groups(comm);
  inner_->set_communicator(*inner_comm_);
  exchange_->set_communicators(*inner_comm_, *outer_comm_);
}

void DilocoStrategy::end_backward() {
  inner_->end_backward();
  stats_ = inner_->last_stats();
}

void DilocoStrategy::step(float lr) {
  inner_->step(lr);
  ++steps_;
  const auto params = model_.flat_params();
  const OuterExchangeStats before = exchange_->stats();
  const int64_t h = config_.inner_steps, d = config_.overlap_steps;
  // An overlapped exchange lands D steps after its round's end (at the next round's end
  // when D = H, before that round's exchange begins).
  if (exchange_->in_flight() && steps_ == begun_at_ + d) {
    set_flight_phase("outer");
    finish_round(params);
  }
  if (steps_ % h == 0) {
    set_flight_phase("outer");
    exchange_->begin(params, d > 0);
    begun_at_ = steps_;
    if (d == 0) finish_round(params);
  }
  const OuterExchangeStats& after = exchange_->stats();
  stats_.bytes += after.bytes_sent - before.bytes_sent;
  stats_.exposed_s += after.exposed_s - before.exposed_s;
  stats_.comm_s += after.exposed_s - before.exposed_s;
}

void DilocoStrategy::settle() {
  const auto params = model_.flat_params();
  if (exchange_->in_flight()) finish_round(params);
  if (steps_ % config_.inner_steps != 0 && steps_ > begun_at_) {
    // The run stopped inside a round: its outer step, so that every worker ends equal.
    exchange_->begin(params, false);
    begun_at_ = steps_;
    finish_round(params);
  }
}

void DilocoStrategy::finish_round(std::span<float> params) {
  exchange_->finish(params);
  average_buffers();
}

void DilocoStrategy::average_buffers() {
  // Buffers are not trained: no pseudo-gradient, no outer step. Between round ends each
  // group keeps its own (they describe its worker's activations on its data). Where the
  // new theta lands they are averaged over the groups rather than left per group (as
  // torchft's DiLoCo leaves them: its outer step syncs parameters only) or taken from
  // one group: theta is the groups' average; the mean of the groups' running means is
  // the running average of every group's batch means (the update is linear); the mean
  // of their running variances is what averaging every state entry gives (FedAvg-style
  // model averaging; it leaves out the spread between the groups' means). Every rank
  // then holds the same model state, so the evaluation (sharded over every rank), the
  // saved model (rank 0's) and an elastic round end (any member's) agree. Blocking, at the
  // landing step (not at the round's end under overlap: the statistics then are those of
  // the parameters being applied): a few tens of KB (ResNet-18: 9,620 values, 38 KB per
  // rank) against the model's megabytes.
  const std::vector<BufferInfo>& infos = model_.buffer_infos();
  if (infos.empty() || outer_comm_->size() == 1) return;
  const std::span<float> b = model_.flat_buffers();
  std::vector<float> counts;
  for (const BufferInfo& i : infos)
    if (i.is_count) counts.insert(counts.end(), b.begin() + std::ptrdiff_t(i.offset), b.begin() + std::ptrdiff_t(i.offset + i.numel));
  exchange_->average_across_groups(b);
  auto kept = counts.begin();
  for (const BufferInfo& i : infos) {
    if (!i.is_count) continue;
    std::copy(kept, kept + std::ptrdiff_t(i.numel), b.begin() + std::ptrdiff_t(i.offset));
    kept += std::ptrdiff_t(i.numel);
  }
}

void DilocoStrategy::starts_at_step(int64_t step) {
  steps_ = step;
  if (begun_at_ < 0 || begun_at_ > step) begun_at_ = step - step % config_.inner_steps;
}

ModelStateBytes DilocoStrategy::memory_bytes() const {
  ModelStateBytes m = inner_->memory_bytes();
  m.world = comm_->size();
  // The outer state: theta's slice and the momentum's, the averaged slice, the group's
  // allgather buffer, and the round's end under overlap.
  const size_t slice = exchange_->hi() - exchange_->lo();
  m.optimizer += (slice * (config_.outer_momentum > 0 ? 3 : 2)) * sizeof(float);
  m.comm += (inner_comm_->size() > 1 ? model_.num_params() * sizeof(float) : 0) +
            (config_.overlap_steps > 0 ? model_.num_params() * sizeof(float) : 0);
  return m;
}

}  // namespace dpt
