#pragma once
// ParallelStrategy: how one data-parallel training step synchronizes, and who owns
// which slice of the model states. The trainer (dist_trainer.h) runs the same step for
// every strategy:
//
//   zero_grad(); for each micro-step { begin_backward(last); forward; loss; backward }
//   end_backward(); clip_grad_norm(); step(lr)
//
// and the strategies differ only behind this interface:
//   DDP (ddp_strategy.h)     every rank holds everything; gradients are averaged with
//                            bucketed allreduce during backward; the optimizer steps
//                            the whole flat buffer.
//   ZeRO-1/2/3               the optimizer state (1), also the gradients (2), also the
//   (zero_strategy.h)        parameters (3) are sharded over the ranks; each rank steps
//                            its own shard.
//
// Terms:
//   working parameters  what the model computes with (bf16-rounded under mixed
//                       precision; only the own shard resident between layers in
//                       ZeRO-3).
//   full parameters     every parameter at full precision (the fp32 masters under
//                       mixed precision) on every rank: what checkpoints hold.
//   optimizer range     the slice [offset, offset + count) of the flat buffer whose
//                       optimizer state this rank holds (everything in DDP, the real
//                       part of its shard in ZeRO).
//   collective forward  a forward that communicates (ZeRO-3 gathers each layer), so
//                       every rank must run the same number of them.
// The communicator is held by pointer: set_communicator between steps is the run-time
// backend switch (same ranks, same world size).
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "comm/communicator.h"
#include "models/nn/module.h"
#include "optim/optimizer.h"
#include "parallel/comm_stats.h"
#include "parallel/model_state_memory.h"

namespace dpt {


struct OptimizerRange {
  size_t offset = 0, count = 0;
};

// Elastic re-forming (docs/elastic.md). Where training stands: the step completed, the
// epoch and the sample position in its order (data/loading/sampler.h).
struct ElasticProgress {
  int64_t step = -1;  // -1: no state (a newcomer)
  int epoch = 0;
  size_t position = 0;
};

// What one rank carries from a strategy over the failed communicator into a fresh one
// over the next generation's. Each strategy defines its own (DDP: the optimizer state
// by name; ZeRO: its snapshots); the trainer only hands it from the old strategy to
// the new one, which may be handed the same state again if a re-forming attempt fails.
struct CarriedState {
  virtual ~CarriedState() = default;
};
using CarriedStatePtr = std::shared_ptr<const CarriedState>;

// The group change a new generation's members adopt the state across.
struct GroupChange {
  ElasticProgress mine;  // this member's (step -1 for a newcomer)
};

class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;

  virtual std::string name() const = 0;  // "DDP", "ZeRO-2", ...
  virtual int zero_stage() const = 0;
  Optimizer& optimizer() { return *optimizer_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  Communicator& communicator() const { return *comm_; }

  // Collective: every rank takes rank 0's parameters, verified by a checksum
  // allgather (std::runtime_error naming the ranks that differ).
  virtual void broadcast_parameters() = 0;
  // Collective over gradient_group(): every rank takes the buffers of that group's rank 0
  // (BatchNorm running statistics; PyTorch DDP's broadcast_buffers). DDP and ZeRO: the
  // world's rank 0. DiLoCo: the inner group's first rank, so that between round ends the
  // buffers, like the gradients, stay inside the group (its round end makes them equal
  // across the groups). Every stage keeps buffers whole on every rank, so this is one
  // broadcast of Module::flat_buffers(); nothing when there are none or the group is one rank.
  void broadcast_buffers();
  // The backend switch: only between steps; the new communicator has the same ranks.
  virtual void set_communicator(Communicator& comm) = 0;

  // Before the first micro-step: gradients to zero (ZeRO-2/3 keep them zero already).
  virtual void zero_grad() = 0;
  // Before each micro-step's backward; sync=false accumulates without communicating.
  virtual void begin_backward(bool sync) = 0;
  // After the last micro-step: gradients synchronized (averaged over the ranks).
  virtual void end_backward() = 0;
  // Clips by the global gradient norm over all ranks' gradients.
  virtual void clip_grad_norm(float max_norm) = 0;
  // Steps the optimizer on what this rank owns and makes the parameters every rank
  // needs for the next forward available (or on their way).
  virtual void step(float lr) = 0;
  // Instead of step() when the fp16 loss scaler skips the step (loss_scaler.h): nothing
  // is updated; every rank holds the parameters the next forward needs already.
  virtual void skip_step() {}
  // After end_backward: the synchronized gradients this rank's optimizer steps (the
  // whole buffer in DDP, this rank's shard in ZeRO).
  virtual std::span<float> owned_grads() = 0;
  // fp16's unscale (loss_scaler.h) over the owned gradients, where they live: *= inv_scale,
  // true when one is inf or NaN afterwards. Device-resident DDP runs it on the GPU.
  virtual bool unscale_owned_grads(float inv_scale);
  // --debug-inject-inf: the first owned gradient becomes inf, where it lives.
  virtual void poison_owned_grad();
  // Waits for communication still in flight after a step (end of training, checkpoints).
  virtual void settle() {}
  // After a checkpoint was loaded: the trainer's step count (DiLoCo places its rounds by it).
  virtual void starts_at_step(int64_t step) {}
  // The ranks whose gradients end_backward averages: everyone, or DiLoCo's inner group
  // (a token-mean loss counts the targets over these; broadcast_buffers and SyncBatchNorm's
  // statistics run over these too). A strategy may replace it in set_communicator and in
  // elastic re-forming: take it again after either.
  virtual Communicator& gradient_group() const { return *comm_; }

  // Collective: the full parameters on every rank (for a checkpoint), then back.
  virtual void expose_full_parameters() = 0;
  // Collective: the full parameters on rank `root` only (the one that writes a
  // checkpoint); the others may hold less (ZeRO-3 sends the shards to root alone).
  // restore_working_parameters() afterwards as well.
  virtual void expose_full_parameters_on(int root) { (void)root; expose_full_parameters(); }
  virtual void restore_working_parameters() = 0;
  virtual bool collective_forward() const { return false; }

  // Collective: writes the optimizer state beside `model_path` (DDP: one file written
  // by rank 0; ZeRO: one shard file per rank), and reads it back from whatever a
  // checkpoint of any world size and stage holds.
  virtual void save_optimizer_state(const std::string& model_path) = 0;
  virtual void load_optimizer_state(const std::string& model_path);
  virtual OptimizerRange optimizer_range() const = 0;

  // ---- elastic re-forming (docs/elastic.md) ----
  // Local, no communication: this rank's state leaves the strategy (which is then
  // destroyed) and enters a fresh one of the same kind over the next communicator.
  virtual CarriedStatePtr carry_out();
  virtual void carry_in(const CarriedStatePtr& state);
  // Collective over the new communicator: every member ends with the same parameters
  // and optimizer state; returns where training stands with them. DDP: the most
  // advanced survivor's. ZeRO: the oldest snapshot the survivors share, assembled from
  // them (ElasticError, on every member, when a shard has no copy left).
  virtual ElasticProgress adopt_group_state(const GroupChange& change);
  // Collective, at a step boundary: keep what a later failure needs (ZeRO: a snapshot of
  // every shard on its `replicas` ring predecessors, named by the elastic `generation`
  // it is taken in; DDP: nothing, every rank holds everything).
  virtual void elastic_snapshot(const ElasticProgress& at, int generation, int replicas) {}
  // Steps between snapshots, given --elastic-snapshot-every (DiLoCo: every round's end).
  virtual int64_t elastic_snapshot_period(int64_t configured) const { return configured; }
  // Whether a planned change (newcomers waiting) may happen after `step` (DiLoCo: only at
  // a round's end; the agreement is the same on every rank, so all defer alike).
  virtual bool accepts_members_now(int64_t step) const { return true; }
  // Whether every rank must take part in the trainer's agreement before the step after
  // `step` (train/agreement_cadence.h). DDP and ZeRO: always (their steps are collectives
  // over all ranks anyway). DiLoCo: at round ends only; between them its inner groups
  // touch nobody else, and the trainer agrees on its own cadence.
  virtual bool world_must_agree_after(int64_t step) const { return true; }

  // This rank's model-state bytes, counted from the buffers (model_state_memory.h).
  virtual ModelStateBytes memory_bytes() const = 0;
  // Stats of the last step: gradient sync plus any parameter exchange.
  const CommStats& last_stats() const { return stats_; }
  virtual size_t num_buckets() const = 0;

 protected:
  ParallelStrategy(Module& model, Communicator& comm) : model_(model), comm_(&comm) {}
  // Bytes of the optimizer state (and fp32 masters) into m.
  void count_optimizer_state(ModelStateBytes& m, size_t master_bytes) const;

  Module& model_;
  Communicator* comm_;
  std::unique_ptr<Optimizer> optimizer_;
  CommStats stats_;
};

// Rank `root`'s parameters to everyone, then an allgather of their FNV-1a checksums;
// `who` names the strategy in the error.
void broadcast_verified(Communicator& comm, std::span<float> params, const std::string& who, int root = 0);
// The same result, the model crossing the links only where it must: the checksums first
// (one allgather of 8 bytes per rank); when every rank already holds rank `root`'s bytes
// (the same seed, --init-from file or round end) nothing more moves, else
// broadcast_verified. For DiLoCo across slow links, where the start's broadcast is a
// model's worth per host, as much as a round's exchange. Returns whether it broadcast.
bool broadcast_where_differs(Communicator& comm, std::span<float> params, const std::string& who, int root = 0);
// Collective (one allgather of 8-byte checksums): the ranks whose `values` differ from rank
// `root`'s, as "1, 3" ("" when every rank holds the same bytes).
std::string ranks_with_other_values(Communicator& comm, std::span<const float> values, int root = 0);
// Collective, for models built sharded (ParamStore::fingerprint): throws on every rank,
// naming the ranks whose fingerprint differs from rank 0's.
void verify_same_parameters(Communicator& comm, uint64_t fingerprint, const std::string& who);

}  // namespace dpt
