#include "optim/zero_optimizer.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include "optim/clip_grad.h"
#include "optim/wire16.h"
#include "optim/zero_pages.h"

namespace dpt {

ZeroOptimizer::ZeroOptimizer(Module& model, Communicator& comm, int stage, Optimizer& shard_optimizer,
                             const DdpConfig& config, DType precision)
    : model_(model), comm_(&comm), stage_(stage), optimizer_(shard_optimizer), layout_(model.num_params(), comm.size()) {
  if (precision != DType::f32 && precision != DType::bf16)
    throw std::invalid_argument(std::string("ZeroOptimizer: precision ") + dtype_name(precision) + " (valid: f32, bf16)");
  if (precision == DType::bf16) master_ = std::make_unique<MasterWeights>();
  if (stage_ < 1 || stage_ > 3)
    throw std::invalid_argument("ZeroOptimizer: stage " + std::to_string(stage) + " (valid: 1, 2, 3)");
  if (optimizer_.numel() != layout_.shard)
    throw std::invalid_argument("ZeroOptimizer: the shard optimizer holds " + std::to_string(optimizer_.numel()) +
                                " elements, the shard is " + std::to_string(layout_.shard));
  // Fails early (length_error) if the world is larger than ParamStore's slack allows.
  model_.store().padded_params(layout_.padded());
  if (stage_ == 1) {
    ddp_ = std::make_unique<DistributedDataParallel>(model_, comm, config);
  } else {
    grad_shard_.assign(layout_.shard, 0.0f);
    // The full gradient buffer starts released: only buckets in flight become resident.
    auto g = model_.flat_grads();
    release_slice(g.data(), g.data() + g.size());
    reducer_ = std::make_unique<ZeroGradReducer>(model_, comm, layout_, config, std::span<float>(grad_shard_));
    if (stage_ == 3) gatherer_ = std::make_unique<ZeroParamGatherer>(model_, comm, layout_, config.overlap, precision);
  }
  // Pieces as large as a gradient bucket: --bucket-mb sets both granularities.
  if (stage_ <= 2 && config.overlap)
    refresher_ = std::make_unique<ZeroParamRefresher>(model_, comm, layout_, config.bucket_bytes, precision);
}

ZeroOptimizer::~ZeroOptimizer() = default;

std::span<float> ZeroOptimizer::param_shard() {
  return model_.store().padded_params(layout_.padded()).subspan(layout_.begin(comm_->rank()), layout_.shard);
}

std::span<float> ZeroOptimizer::grad_shard() {
  if (stage_ >= 2) return grad_shard_;
  return model_.store().padded_grads(layout_.padded()).subspan(layout_.begin(comm_->rank()), layout_.shard);
}

void ZeroOptimizer::broadcast_parameters() {
  settle();
  if (ddp_) {
    ddp_->broadcast_parameters();
  } else {
    broadcast_and_verify();
  }
  // Every rank holds rank 0's full-precision values: the own shard becomes the master
  // and all are rounded alike (stage 3 then keeps only its own shard).
  if (master_) {
    master_->adopt(param_shard());
    round_bf16(model_.flat_params());
  }
  if (gatherer_) gatherer_->release_all();
}

void ZeroOptimizer::broadcast_and_verify() {
  auto params = model_.flat_params();
  comm_->broadcast(Buffer{params.data(), params.size(), DType::f32, {}}, 0);
  const auto* p = reinterpret_cast<const unsigned char*>(params.data());
  uint64_t mine = 1469598103934665603ull;  // FNV-1a, as DDP's checksum
  for (size_t i = 0; i < params.size_bytes(); ++i) mine = (mine ^ p[i]) * 1099511628211ull;
  std::vector<uint64_t> all(size_t(comm_->size()));
  comm_->allgather(make_buffer(reinterpret_cast<int64_t*>(&mine), 1),
                   make_buffer(reinterpret_cast<int64_t*>(all.data()), all.size()));
  std::string bad;
  for (int r = 0; r < comm_->size(); ++r)
    if (all[size_t(r)] != all[0]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (!bad.empty())
    throw std::runtime_error("ZeRO: after broadcasting rank 0's parameters, ranks [" + bad +
                             "] hold different bytes (checksum mismatch)");
}

void ZeroOptimizer::set_communicator(Communicator& comm) {
  if (comm.size() != comm_->size()) throw std::invalid_argument("ZeRO: the new communicator has another world size");
  if (ddp_) ddp_->set_communicator(comm);
  else reducer_->set_communicator(comm);
  if (gatherer_) gatherer_->set_communicator(comm);
  if (refresher_) refresher_->set_communicator(comm);
  comm_ = &comm;
}

void ZeroOptimizer::begin_backward(bool sync) {
  // The first micro-step of a step: gathers since the last step (evaluation) are not its.
  if (gatherer_ && !in_step_) gatherer_->take_bytes();
  in_step_ = true;
  if (ddp_) ddp_->begin_backward(sync);
  else reducer_->begin_backward(sync);
}

void ZeroOptimizer::end_backward() {
  if (ddp_) {
    ddp_->end_backward();
    stats_ = ddp_->last_stats();
  } else {
    reducer_->end_backward();
    stats_ = reducer_->last_stats();
    if (gatherer_) stats_.bytes += gatherer_->take_bytes();  // this step's forward and backward gathers
  }
  if (refresher_) {  // the previous step's refresh, which ran during this forward
    stats_.comm_s += refresher_->take_comm_s();
    stats_.exposed_s += refresher_->take_exposed_s();
  }
}

void ZeroOptimizer::clip_grad_norm(float max_norm) {
  // Padding gradients are zero, so the shards' squares sum to the full buffer's.
  double sq = squared_norm(grad_shard());
  comm_->allreduce(Buffer{&sq, 1, DType::f64, {}}, ReduceOp::sum);
  dpt::clip_grad_norm(grad_shard(), max_norm, sq);
}

void ZeroOptimizer::step(float lr) {
  in_step_ = false;
  if (master_) master_->step(optimizer_, param_shard(), grad_shard(), lr);
  else optimizer_.step(param_shard(), grad_shard(), lr);
  if (gatherer_) return;  // stage 3: layers gather what they need when they run
  if (refresher_) {
    stats_.bytes += refresher_->launch();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const DType wire = master_ ? DType::bf16 : DType::f32;
  allgather_parameters(wire);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.comm_s += dt;
  stats_.exposed_s += dt;
  stats_.bytes += int64_t(layout_.padded() * dtype_size(wire));
}

void ZeroOptimizer::allgather_parameters(DType wire) {
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

}  // namespace dpt

namespace dpt {

void ZeroOptimizer::settle() {
  if (refresher_) refresher_->settle();
}

void ZeroOptimizer::gather_all_parameters() {
  settle();
  if (master_) master_->expose(param_shard());
  if (gatherer_) gatherer_->gather_all();
  else if (master_) allgather_parameters(DType::f32);
}

void ZeroOptimizer::release_parameters() {
  if (gatherer_) gatherer_->release_all();
  if (!master_) return;
  // Rounding the exposed masters gives exactly the working values back.
  if (gatherer_) round_bf16(param_shard());
  else round_bf16(model_.store().padded_params(layout_.padded()));
}

}  // namespace dpt
