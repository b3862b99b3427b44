#pragma once
// DiLoCo (Douillard et al. 2023, arXiv:2311.08105) as a ParallelStrategy: training across
// links too slow to average gradients every step.
//
// Terms:
//   inner group   ranks that train as one worker: synchronous DDP among themselves
//                 (an inner DdpStrategy over a split of the communicator) with the
//                 inner optimizer (AdamW in the paper). The ranks of one host by
//                 default, each rank alone with --diloco-group 1.
//   round         H inner steps (--inner-steps). Rounds end at steps H, 2H, ... of the
//                 run, so a resume at any step knows where its round stands.
//   global params theta: the parameters every worker started the round from, the same
//                 on every rank; held sharded: inner-group rank i of g keeps slice i.
//   pseudo-gradient  delta = theta - (the worker's parameters at the round's end).
//   outer exchange   each rank averages its slice of delta with the ranks of the same
//                 slice in the other groups (one allreduce on the cross-group split, in
//                 --outer-dtype), so a host sends one model's worth per round whatever
//                 its rank count. Then theta's slice takes one step of SGD with Nesterov
//                 momentum (torch.optim.SGD(nesterov=True), optim/sgd.h) on the average,
//                 and the inner group allgathers the new slices (within the host).
//   overlap D     (--outer-overlap-steps) the exchange runs while the worker takes D more
//                 inner steps; after them the new theta is applied with the progress of
//                 those D steps kept: params = theta_new + (params - params_at_round_end)
//                 (the delayed outer step of eager/one-step-delayed DiLoCo). D = 0 waits.
//   buffers       module state that is not trained (BatchNorm's running statistics).
//                 Between round ends they belong to the inner group, like its gradients:
//                 the trainer's broadcast_buffers runs over gradient_group() (the group's
//                 first rank's to the others) and SyncBatchNorm reduces over it. Where the
//                 new theta is applied (the round's end, D steps later under overlap, the
//                 end of the run) every rank's buffers are averaged over the groups
//                 (average_buffers), so every rank then holds the same model state.
//
// Between round ends the trainer's agreement crosses the groups about once a second
// (train/agreement_cadence.h), and its loss report every --log-every steps: a few hundred
// bytes each, against one model per round; nothing else (tests/parallel/diloco,
// "buffers": mlp, gpt and ResNet-18 with and without SyncBatchNorm).
#include <memory>
#include <vector>

#include "parallel/ddp/ddp_strategy.h"
#include "parallel/diloco/outer_exchange.h"
#include "parallel/parallel_strategy.h"
#include "parallel/strategy_config.h"

namespace dpt {

class DilocoStrategy : public ParallelStrategy {
 public:
  DilocoStrategy(Module& model, Communicator& comm, const StrategyConfig& config, const OptimizerFactory& make_optimizer);

  std::string name() const override;
  int zero_stage() const override { return 0; }
  // Rank 0's parameters and buffers on every rank (sent only where they differ: ranks built
  // from the same seed or file hold them already); theta starts as those parameters. After
  // a resume that restored each worker's own parameters and buffers (mid-round), those are
  // kept instead.
  void broadcast_parameters() override;
  void set_communicator(Communicator& comm) override;

  void zero_grad() override { inner_->zero_grad(); }
  void begin_backward(bool sync) override { inner_->begin_backward(sync); }
  void end_backward() override;
  void clip_grad_norm(float max_norm) override { inner_->clip_grad_norm(max_norm); }
  // The inner step; at a round's end the outer exchange starts (and, without overlap,
  // is applied); D steps after it, an overlapped exchange is applied.
  void step(float lr) override;
  void skip_step() override { inner_->skip_step(); }
  std::span<float> owned_grads() override { return inner_->owned_grads(); }
  bool unscale_owned_grads(float inv_scale) override { return inner_->unscale_owned_grads(inv_scale); }
  void poison_owned_grad() override { inner_->poison_owned_grad(); }
  // The end of training: an exchange in flight is applied, and a round cut short by the
  // step limit gets its outer step, so every rank ends with the same parameters.
  void settle() override;
  void starts_at_step(int64_t step) override;

  void expose_full_parameters() override {}
  void restore_working_parameters() override {}

  // One file per rank beside the model: the worker's parameters, its inner optimizer
  // state, its slice of theta and of the outer momentum, and an exchange in flight
  // (diloco_checkpoint.cpp). A resume needs the same world and groups.
  void save_optimizer_state(const std::string& model_path) override;
  void load_optimizer_state(const std::string& model_path) override;
  OptimizerRange optimizer_range() const override { return {0, model_.num_params()}; }

  // Elastic (diloco_elastic.cpp): the state at the last round's end travels; a new group
  // starts again from the newest round end any member holds (the unfinished round is
  // redone by the new membership on the same samples).
  CarriedStatePtr carry_out() override;
  void carry_in(const CarriedStatePtr& state) override;
  ElasticProgress adopt_group_state(const GroupChange& change) override;
  void elastic_snapshot(const ElasticProgress& at, int generation, int replicas) override;
  int64_t elastic_snapshot_period(int64_t) const override { return config_.inner_steps; }
  bool accepts_members_now(int64_t step) const override { return step % config_.inner_steps == 0; }
  bool world_must_agree_after(int64_t step) const override { return step % config_.inner_steps == 0; }
  Communicator& gradient_group() const override { return *inner_comm_; }

  ModelStateBytes memory_bytes() const override;
  size_t num_buckets() const override { return inner_->num_buckets(); }

  // For the summary: rounds completed and this rank's outer exchange totals.
  const OuterExchangeStats& outer_stats() const { return exchange_->stats(); }

 private:
  // Splits the communicator into inner groups and the cross-group slices (collective).
  void build_groups(Communicator& comm);
  // The outer step lands: the exchange's finish, then average_buffers.
  void finish_round(std::span<float> params);
  // Collective over the cross-group split: this rank's buffers averaged with those of the
  // ranks of its index in the other groups; counters (num_batches_tracked, equal in every
  // group) keep their value. Nothing when the model has none.
  void average_buffers();

  DilocoConfig config_;
  std::unique_ptr<Communicator> inner_comm_, outer_comm_;
  std::unique_ptr<DdpStrategy> inner_;
  std::unique_ptr<OuterExchange> exchange_;
  int64_t steps_ = 0;           // inner steps taken by this strategy's run (the trainer's step count)
  int64_t begun_at_ = -1;       // steps_ at the round end whose exchange began last
  bool resumed_worker_ = false;  // load_optimizer_state restored this worker's parameters

  // The last round end's state for elastic re-forming (diloco_elastic.cpp).
  struct Snapshot;
  std::shared_ptr<Snapshot> snapshot_;
};

}  // namespace dpt
