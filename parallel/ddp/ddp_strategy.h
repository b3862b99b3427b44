#pragma once
// DDP (ZeRO stage 0) as a ParallelStrategy: DistributedDataParallel's semantics. Every
// rank holds the full parameters, gradients and optimizer state; gradients are
// averaged by bucketed allreduce overlapped with backward (grad_allreduce.h); every
// rank then runs the same optimizer step on the whole flat buffer, so the replicas
// stay bit-identical. Under mixed precision (bf16) the optimizer steps an fp32 master
// of the whole buffer (master_weights.h). Device-resident (DdpConfig::optimizer_on_device)
// the optimizer and clipping run on the device copies and the host ones are refreshed
// only when read (models/nn/param_store.h).
#include <memory>

#include "parallel/ddp/grad_allreduce.h"
#include "parallel/parallel_strategy.h"
#include "parallel/precision/master_weights.h"
#include "parallel/strategy_config.h"

namespace dpt {

class DdpStrategy : public ParallelStrategy {
 public:
  DdpStrategy(Module& model, Communicator& comm, const StrategyConfig& config, const OptimizerFactory& make_optimizer);

  std::string name() const override { return "DDP"; }
  int zero_stage() const override { return 0; }
  void broadcast_parameters() override;
  void set_communicator(Communicator& comm) override;
  void zero_grad() override { model_.zero_grad(); }
  // The optimizer's step count decides whether PowerSGD compresses yet.
  void begin_backward(bool sync) override { sync_.begin_backward(sync, optimizer_->step_count()); }
  void end_backward() override { stats_ = sync_.end_backward(); }
  void clip_grad_norm(float max_norm) override;
  void step(float lr) override;
  std::span<float> owned_grads() override { return model_.flat_grads(); }
  bool unscale_owned_grads(float inv_scale) override;
  void poison_owned_grad() override;
  void expose_full_parameters() override;
  void restore_working_parameters() override;
  // Also PowerSGD's state (powersgd_checkpoint.h), one file per rank.
  void save_optimizer_state(const std::string& model_path) override;
  void load_optimizer_state(const std::string& model_path) override;
  OptimizerRange optimizer_range() const override { return {0, model_.num_params()}; }
  ModelStateBytes memory_bytes() const override;
  CarriedStatePtr carry_out() override;
  void carry_in(const CarriedStatePtr& state) override;
  // The most advanced survivor's state, broadcast from it.
  ElasticProgress adopt_group_state(const GroupChange& change) override;
  size_t num_buckets() const override { return sync_.num_buckets(); }

 private:
  // Every rank takes rank `root`'s parameters (verified) and optimizer state.
  void adopt_state_from(int root);

  GradAllreduce sync_;
  std::unique_ptr<MasterWeights> master_;  // mixed precision on host parameters
  bool on_device_ = false;                 // device-resident (DdpConfig::optimizer_on_device)
};

}  // namespace dpt
