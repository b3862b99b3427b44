#pragma once
// ZeRO stages 1, 2 and 3 as a ParallelStrategy (ZeroRedundancyOptimizer).
//
// Terms (see shard_layout.h for P, N, S, shard, padding):
//   shard optimizer  an ordinary Optimizer built for S elements: it holds the optimizer
//                    state of this rank's shard only and steps it with the same code a
//                    full-buffer optimizer runs (optimizer.h says why that is exact).
//   stage 1          gradients are synchronized exactly as DDP does (grad_allreduce.h:
//                    bucketed allreduce avg, overlapped with backward); each rank then
//                    steps its shard of the parameters with its shard of the gradients.
//   stage 2          gradients are reduced (avg) bucket by bucket during backward into
//                    the owners' gradient shards (zero_grad_reducer.h); the full
//                    gradient does not stay resident; each rank steps its shard.
//   stage 3          as stage 2, and the parameters are sharded too: only the own shard
//                    stays resident, layers gather theirs on use (zero_param_gatherer.h);
//                    no allgather after the step (the next forward gathers).
//   allgather        stages 1, 2: after the step, an in-place allgather over the padded flat
//                    parameter buffer (rank r's slot is its shard) gives every rank
//                    the full updated parameters for the next forward.
//   mixed precision  precision bf16 (master_weights.h): the shard optimizer steps an fp32
//                    master copy of this rank's shard; the working parameters are its
//                    bf16 rounding and are allgathered (stages 1, 2) or broadcast per
//                    layer (stage 3) as bf16. The bf16 allgather lands in the first half
//                    of the flat fp32 buffer's bytes and is widened in place
//                    (wire16.h), so it needs no full-size staging buffer.
//   refresh          stages 1, 2 with overlap on: instead of a blocking allgather, the
//                    updated shards are broadcast from their owners asynchronously and
//                    the next forward waits per layer only for what it reads
//                    (zero_param_refresher.h); the same bytes arrive, so the same bits.
//   device-resident  stages 1 and 2 with --optimizer-device cuda (zero_resident.cpp): the
//                    shard optimizer's state, the parameters and the gradients stay on
//                    the GPU; stage 1 allreduces device buckets, stage 2 reduces device
//                    pieces into a device gradient shard (zero_grad_reducer.h); each rank
//                    steps its device shard and the shards are allgathered in place on
//                    the device (blocking: the refresh is host-side). Stage 3 gathers
//                    into host memory and is refused with it.
//   comm time        gradient sync (as DDP reports it) plus the parameter allgather:
//                    with overlap off it is blocking and counts as exposed too; with
//                    overlap on the refresh's time is reported in the next step, with
//                    what the forward waited for as exposed.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "models/kernels/cuda/device_floats.h"
#include "parallel/ddp/grad_allreduce.h"
#include "parallel/parallel_strategy.h"
#include "parallel/precision/master_weights.h"
#include "parallel/shard_layout.h"
#include "parallel/strategy_config.h"
#include "parallel/zero/zero_grad_reducer.h"
#include "parallel/zero/zero_elastic_snapshot.h"
#include "parallel/zero/zero_param_gatherer.h"
#include "parallel/zero/zero_param_refresher.h"

namespace dpt {

class ZeroStrategy : public ParallelStrategy {
 public:
  // The optimizer is built for ShardLayout(model.num_params(), comm.size()).shard elements.
  ZeroStrategy(Module& model, Communicator& comm, const StrategyConfig& config, const OptimizerFactory& make_optimizer);
  ~ZeroStrategy() override;

  std::string name() const override { return "ZeRO-" + std::to_string(stage_); }
  int zero_stage() const override { return stage_; }
  void broadcast_parameters() override;
  void set_communicator(Communicator& comm) override;
  void zero_grad() override;
  void begin_backward(bool sync) override;
  void end_backward() override;
  // The global norm over all ranks' shards (one allreduce of a double).
  void clip_grad_norm(float max_norm) override;
  // Steps this rank's shard, then (stages 1, 2) allgathers the parameters, or with
  // overlap on launches the refresh that the next forward waits for layer by layer.
  void step(float lr) override;
  void skip_step() override { in_step_ = false; }
  std::span<float> owned_grads() override { return grad_shard(); }
  // Device-resident: on the device shard; otherwise ParallelStrategy's host ones.
  bool unscale_owned_grads(float inv_scale) override;
  void poison_owned_grad() override;
  // Waits for a refresh in flight (before reading every parameter, or at the end).
  void settle() override;
  // Collective: every rank holds all parameters at full precision (the master weights
  // in mixed precision), then back to the working state (stage 3: the own shard
  // only). No-ops in fp32 stages 1 and 2, where all are always resident.
  void expose_full_parameters() override;
  // Stage 3: every shard to root alone (the others keep their own shard only), so a
  // checkpoint costs the whole model on one rank, not on all.
  void expose_full_parameters_on(int root) override;
  void restore_working_parameters() override;
  bool collective_forward() const override { return stage_ == 3; }
  void save_optimizer_state(const std::string& model_path) override;
  OptimizerRange optimizer_range() const override;
  ModelStateBytes memory_bytes() const override;
  size_t num_buckets() const override { return allreduce_ ? allreduce_->num_buckets() : reducer_->num_buckets(); }

  // Elastic (zero_elastic_snapshot.h): the snapshots travel to the next generation's
  // strategy, which assembles the state of the oldest one the survivors share.
  CarriedStatePtr carry_out() override;
  void carry_in(const CarriedStatePtr& state) override;
  ElasticProgress adopt_group_state(const GroupChange& change) override;
  void elastic_snapshot(const ElasticProgress& at, int generation, int replicas) override;

  const ShardLayout& layout() const { return layout_; }
  // This rank's gradient shard as the step sees it (a view into the model's padded
  // flat gradient buffer for stage 1, the owned shard buffer for stages 2 and 3).
  std::span<float> grad_shard();
  std::span<float> param_shard();

 private:
  // Stages 1, 2: every rank's shard to everyone, in wire (f32 in place, or bf16).
  void allgather_parameters(DType wire);
  // Device-resident stage 1 (zero_resident.cpp): this rank's shard of a device flat
  // buffer; the step and the clipping on the device.
  float* device_shard(float* flat) const;
  // The device gradients this rank steps: its slice of the model's (stage 1) or the
  // reduced device shard (stage 2).
  float* device_grads_to_step();
  void step_on_device(float lr);
  void clip_grad_norm_on_device(float max_norm);

  int stage_;
  ShardLayout layout_;
  std::unique_ptr<GradAllreduce> allreduce_;      // stage 1
  std::vector<float> grad_shard_;                 // stages 2, 3: S elements
  DeviceFloats device_grad_shard_;                // stage 2 device-resident: S device elements
  std::unique_ptr<ZeroGradReducer> reducer_;      // stages 2, 3
  std::unique_ptr<ZeroParamGatherer> gatherer_;   // stage 3
  std::unique_ptr<ZeroParamRefresher> refresher_; // stages 1, 2 with overlap
  std::unique_ptr<MasterWeights> master_;         // mixed precision
  std::vector<uint16_t> wire_shard_;              // mixed precision: bf16 copy of the shard to allgather
  bool on_device_ = false;  // device-resident stage 1 (--optimizer-device cuda)
  bool in_step_ = false;  // between a step's first begin_backward and its step()
  std::shared_ptr<const ZeroSnapshot> committed_, previous_;  // elastic
};

}  // namespace dpt
