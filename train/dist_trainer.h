#pragma once
// The distributed training loop behind build/bin/train: one replica per rank, data
// sharded by DistributedSampler, gradients and parameters synchronized by one
// ParallelStrategy (DDP or ZeRO-1/2/3, parallel_strategy.h), evaluation sharded and
// reduced, checkpoints and resume, and the run-time backend switch. A reader can
// follow one step top to bottom in DistTrainer::run(); nothing in it depends on which
// strategy runs.
//
// Terms:
//   step         one optimizer update = grad_accum micro-steps of batch_size samples per rank.
//   global batch batch_size x grad_accum x world size samples per step.
//   token mean   the loss of a dataset whose batches carry ignored targets (text-docs):
//                the mean over every target token of the global batch, all ranks and
//                micro-steps together. The ranks agree the step's target count C with
//                one allreduce before any backward; each micro-step backpropagates
//                (world / C) x its loss sum, and the strategy's gradient average
//                (divide by world) leaves the gradient of the global mean. Other
//                datasets keep the mean per sample (each micro-batch's mean, weighted
//                by 1 / grad_accum), which is the same when every sample has as many
//                targets.
//   uneven input when some rank runs out of batches first, every rank learns it from the
//                ranks' agreement before the step and the epoch ends for all there
//                (the leftover batches of the longer ranks are skipped and counted).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/store/elastic_membership.h"
#include "data/dataset.h"
#include "data/images/image_transform.h"
#include "models/nn/model_config.h"
#include "models/nn/module.h"
#include "models/io/safetensors.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "parallel/model_state_memory.h"
#include "parallel/parallel_strategy.h"
#include "parallel/precision/loss_scaler.h"
#include "parallel/strategy_config.h"
#include "parallel/sync_batch_norm.h"
#include "train/agreement_cadence.h"
#include "train/straggler_watch.h"
#include "train/trainer_common.h"

namespace dpt {

struct DistTrainConfig {
  std::string model = "mlp";     // a built-in model's name (make_model), or the name of the caller's
  // A model and data of the caller's (the public API's dpt::train_main, dpt/trainer.h),
  // built by these instead of by name: the model on every rank from model_config (its seed),
  // never sharded (ZeRO-3 shards it after it is built whole); the data's two splits.
  std::function<std::unique_ptr<Module>(const ModelConfig&)> make_model;
  std::function<std::unique_ptr<Dataset>(Split)> make_dataset;
  std::string dataset;           // empty: the model's (default_dataset: text-docs for gpt2, text for gpt, ...)
  std::string data_dir;
  std::string jsonl_field;       // text-docs: the documents are this field of JSON lines
  std::string tokenizer_dir;     // text-docs: GPT-2's vocabulary (empty: the installed one)
  double val_fraction = 0.1;     // text-docs: share of the documents held out (text_docs.h)
  std::string val_file;          // text-docs: held-out documents from this file instead
  ModelConfig model_config;
  // Every model but gpt2 (which loads model_config.init_from while it is built): start
  // from this file's parameters and buffers (train/init_from.h).
  std::string init_from;
  int64_t num_classes = 0;       // classification data: the head's classes (0: the data's)
  int epochs = 1;
  int64_t steps = 0;             // > 0: stop after this many steps
  size_t batch_size = 64;        // per rank, per micro-step
  int grad_accum = 1;
  std::string optimizer = "sgd";
  OptimizerConfig optimizer_config;
  std::string lr_schedule = "constant";
  LrScheduleConfig lr_config;
  // The schedule flags the user gave (lr-schedule, lr, warmup-steps, min-lr, step-size,
  // gamma): on resume one that disagrees with the checkpoint's schedule is refused; the
  // rest follow the checkpoint (dist_trainer_checkpoint.cpp).
  std::vector<std::string> lr_flags_given;
  float clip_norm = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  StrategyConfig parallel;       // ZeRO stage (0: DDP), buckets, overlap, wire, precision
  std::string device = "cpu";    // cuda: the model computes on GPU LOCAL_RANK mod count (Module::to_cuda)
  std::string checkpoint_dir;    // non-empty: save here
  int64_t save_every = 0;        // steps between checkpoints (0: only at the end)
  bool resume = false;           // continue from checkpoint_dir's latest checkpoint
  bool auto_resume = false;      // resume if checkpoint_dir has a checkpoint, else start fresh
  // Stop at the next step boundary when a rank got SIGTERM or SIGUSR1 (train/stop_signals.h):
  // agreed in the step's agreement, a checkpoint written there, TrainSummary::stopped set.
  bool stop_on_signal = false;
  // Where the strategy lets steps go without the world's agreement (DiLoCo between round
  // ends), the ranks still agree about this often (train/agreement_cadence.h): the
  // longest a stop signal waits. <= 0: before every step.
  double agreement_interval_s = 1.0;
  // A rank whose compute per step is this many times the fastest rank's in 8 agreements
  // in a row is named a straggler (train/straggler_watch.h); 0: not watched.
  double straggler_ratio = 1.5;
  // Elastic: a named straggler leaves the job and the others re-form without it
  // (DistTrainer::evict_straggler); false: it is only named.
  bool straggler_evict = false;
  int64_t eval_every = 0;        // steps between evaluations (0: at each epoch end)
  int64_t log_every = 10;
  size_t max_eval_samples = 0;
  // Samples per evaluation forward; 0: kEvalBatch (256), but for gpt2 the per-rank
  // training batch (its forward keeps layers x seq x width activations per sample:
  // 256 sequences at once would hold far more than a training step).
  size_t eval_batch_size = 0;
  int64_t exit_after_step = 0;   // test hook: die abruptly (as a crash) after this step
  int uneven_rank = -1;          // test hook: this rank's data ends after uneven_batches
  int64_t uneven_batches = 0;    //   micro-batches per epoch (uneven inputs)
  bool elastic = false;          // enable_elastic() will follow: the world may change, so ZeRO-3 builds the whole model
  bool elastic_join = false;     // elastic: this process joins a running job (state comes from the members)
  int64_t elastic_snapshot_every = 10;  // elastic ZeRO: steps between neighbour snapshots (K)
  int elastic_snapshot_replicas = 1;    // elastic ZeRO: ring successors whose shard each rank copies (R)
  std::string sample_log;        // test hook: append "step world rank index..." per completed step to this file
  bool memory_check = true;      // refuse, before allocating, a job this host cannot hold (memory_check.h)
  std::string state_dump;        // test hook: at the end every rank writes its model (parameters at full
                                 //   precision and buffers) to <state_dump>.rank<r>.safetensors
  ImageOptions image;            // image datasets: padding (both splits), augmentation (training split)
  // BatchNorm under data parallelism (docs/resnet.md):
  bool broadcast_buffers = true; // rank 0's buffers to every rank before each step's first training
                                 //   forward (PyTorch DDP's broadcast_buffers=True; DiLoCo: the
                                 //   inner group's first rank's, within the group)
  bool sync_bn = false;          // every BatchNorm is a SyncBatchNorm over the strategy's gradient
                                 //   group (DiLoCo: the inner group)
  // parallel.precision f16: the model computes in (emulated) fp16 and a dynamic loss
  // scaler (loss_scaler.h) scales the loss and skips steps with inf/NaN gradients.
  LossScalerConfig loss_scaler;
  bool count_zero_grads = false; // measurement: the fraction of synchronized gradient elements that are
                                 //   exactly 0 (fp16 without loss scaling: underflow on top of fp32's zeros)
  int inject_inf_rank = -1;      // test hook: this rank sets one of its synchronized gradients
  int64_t inject_inf_step = 0;   //   to inf in this step (before the scaler's check)
};

// Elastic training (train --elastic, docs/elastic.md): when a peer dies the survivors
// agree on the next generation's membership through the rendezvous store, build its
// communicator, and go on from the most advanced survivor's state; processes waiting
// to join are taken in at a step boundary the same way.
struct ElasticContext {
  ElasticRendezvous* rendezvous = nullptr;
  Membership membership;  // this process's current generation
  // Builds the communicator of a generation this process is a member of.
  std::function<std::unique_ptr<Communicator>(const Membership&)> make_comm;
  Millis join_check{1000};  // how often rank 0 asks the store whether someone waits to join
};

// A membership change, as the log and --metrics-out record it.
struct MembershipChange {
  int generation = 0;
  int world_size = 0;
  std::vector<std::string> prev_members;  // ids of the group that trained before, by rank
  std::vector<std::string> lost;    // ids of it that left (died, hung, unreachable)
  int joined = 0;                   // newcomers taken in
  int64_t resumed_after_step = 0;   // the step the group goes on from
  int64_t lost_steps = 0;           // completed steps the survivors had to give up
  double recovery_s = 0;            // from the failure seen here to the new group's state in place
  bool from_checkpoint = false;     // the state was not in memory: the last checkpoint on disk
  std::string reason;
};

// Thrown after config.exit_after_step steps so a test can kill the run at a known
// point (the train tool then dies without any cleanup, like a crash).
struct SimulatedCrash : std::runtime_error {
  explicit SimulatedCrash(int64_t step) : std::runtime_error("simulated crash after step " + std::to_string(step)) {}
};

struct StepLog {
  int64_t step = 0;
  int epoch = 0;
  double loss = 0;               // the step's loss over all ranks: per sample, or per target token (token mean)
  float lr = 0;
  double samples_per_s = 0;      // global
  double comm_s = 0, exposed_s = 0;  // of the last step
  int64_t comm_bytes = 0;        // of the last step (CommStats::bytes)
  int world_size = 0;
  size_t sample_begin = 0, sample_end = 0;  // the step's positions in the epoch's order (all ranks)
  float loss_scale = 0;          // fp16: the loss scale after this step (0: no scaler)
  int64_t skipped_steps = 0;     // fp16: steps skipped for inf/NaN gradients so far
  uint64_t other_hosts_bytes = 0;  // this rank's bytes to and from other hosts so far, on the
                                   //   communicator in use (Traffic::other_hosts_bytes, this
                                   //   step's loss report included)
};

// Host<->device bytes of a step on CUDA: the model mirror's parameter uploads and
// gradient downloads plus what the communicator's staging copied (0 on the CPU).
struct PcieBytes {
  uint64_t to_host = 0, to_device = 0;
};

// Payload one communicator carried over the run (comm/traffic.h): the one in use at the
// end, and each one a backend switch retired (read at the end: a retired one that the
// caller still holds shows what it carried after the switch too, which must be nothing).
struct BackendTraffic {
  std::string backend;
  Traffic carried;
  bool retired = false;
};

struct TrainSummary {
  int64_t steps = 0;
  double time_s = 0;
  double samples_per_s = 0;
  double comm_s = 0, exposed_s = 0;  // totals over the run
  int64_t skipped_batches = 0;   // uneven inputs: batches this rank had but could not use
  EvalResult eval;
  double last_loss = 0;
  double step_s = 0;             // mean wall time of one step (forward to parameters updated)
  double comm_bytes_per_step = 0;  // gradient sync + parameter allgather bytes this rank handed to the communicator, per step
  std::string backend;           // the communicator in use at the end (after any switch)
  PcieBytes pcie_per_step;       // mean over the steps run
  int world_size = 0;            // at the end (elastic: after any membership change)
  int recoveries = 0;            // elastic: membership changes after a failure
  int64_t lost_steps = 0;        // elastic: completed steps given up in those
  double zero_grad_frac = 0;     // count_zero_grads: over every step's owned gradients
  float loss_scale = 0;          // fp16: at the end (0: no scaler)
  int64_t skipped_steps = 0;     // fp16: steps skipped for inf/NaN gradients
  bool stopped = false;          // stopped on a signal (stop_on_signal), checkpoint at `steps` written
  int64_t agreements = 0;        // the world's agreements before a step (every step under DDP and ZeRO)
  int straggler_rank = -1;       // named by the straggler watch at the end (-1: none)
  double straggler_ratio = 0;    // its compute per step over the fastest rank's
  std::vector<std::string> evicted;  // elastic ids of the stragglers evicted (straggler_evict), in order
  std::vector<BackendTraffic> traffic;  // retired communicators first, the one in use last
};

// What run() reports as it goes; every callback fires on every rank (print on rank 0).
struct TrainCallbacks {
  std::function<void(const StepLog&)> on_log;
  std::function<void(int64_t step, const EvalResult&)> on_eval;
  std::function<void(const std::string&)> on_event;  // e.g. "switched to backend mpi after step 12"
  std::function<void(const MembershipChange&)> on_membership;  // elastic (every rank of the new group)
  // Elastic: this rank leaves its generation (every rank that does, with its reason).
  std::function<void(int generation, const std::string& why)> on_leave;
  // Test hook: called inside each step at "forward", "backward", "sync" (gradients in
  // flight, before waiting for them) and "update" (before the optimizer step); elastic:
  // "adopt" (a member of a new generation, before it takes the group's state).
  std::function<void(int64_t step, const char* phase)> on_phase;
};

class DistTrainer {
 public:
  DistTrainer(DistTrainConfig config, Communicator& comm);
  ~DistTrainer();

  // Runs the configured epochs/steps.
  TrainSummary run(const TrainCallbacks& callbacks);
  EvalResult evaluate();
  // The backend switch: from now on communicate over `comm` (same ranks, same size).
  void set_communicator(Communicator& comm);
  // Schedules a switch once `at_step` steps are done, to a communicator made by `make`.
  void schedule_switch(int64_t at_step, std::function<std::unique_ptr<Communicator>()> make);
  // The communicator in use now.
  Communicator& communicator() const { return *comm_; }
  // Elastic: from now on a communicator failure re-forms the group instead of ending
  // the run (only with a strategy that supports it).
  void enable_elastic(ElasticContext context);

  Module& model() { return *model_; }
  const Dataset& train_set() const { return *train_; }
  const Dataset& held_out_set() const { return *test_; }
  ParallelStrategy& strategy() { return *strategy_; }
  size_t num_buckets() const { return strategy_->num_buckets(); }
  // Model-state bytes of this rank, counted from the buffers (model_state_memory.h).
  // The strategy's measured bytes, with what the memory check planned (gpt2).
  ModelStateBytes memory_bytes() const;
  // cb: its on_phase(step, "save") fires once this rank's files are written, before the
  // barrier after which `latest` moves (a test hook's signal lands mid-checkpoint there).
  void save_checkpoint(int64_t step, int epoch, int64_t batches_done, const TrainCallbacks* cb = nullptr) const;
  // Rank 0, full parameters exposed: DIR/model.safetensors; for gpt2 in
  // GPT2LMHeadModel's layout with config.json beside it (save_gpt2_pretrained).
  void write_model_file(const std::string& dir, const Metadata& metadata) const;
  std::string final_model_path() const;

 private:
  // What a run accumulates over its steps (for the summary and the log lines).
  struct Totals {
    double train_time = 0;
    int64_t samples_done = 0, steps_run = 0, comm_bytes = 0;
    double zero_grads = 0, grads_seen = 0;  // count_zero_grads
    PcieBytes pcie;
    TrainSummary sum;
  };
  bool load_latest_checkpoint();
  // One step's loss on this rank: `sum` over `weight` (samples, or target tokens under
  // the token mean) is its share of the logged mean; `samples` it consumed.
  struct StepLoss {
    double sum = 0, weight = 0, samples = 0;
  };
  // One optimizer step on the fetched micro-batches.
  StepLoss train_step(std::vector<Batch>& micro, Totals& t, float lr, const TrainCallbacks& cb);
  // run()'s steps (dist_trainer_loop.cpp), in the order run() takes them.
  enum class EpochEnd { data_end, last_step, reformed, stopped };
  enum class StepAgreement { step, out_of_data, newcomers_wait, stop };
  struct SampleLog;
  bool last_step_reached() const;
  // Steps from (epoch_, position_) until the data, the configured steps or the group ends.
  EpochEnd train_epoch(std::vector<Batch>& micro, int64_t first_step, Totals& t, const TrainCallbacks& cb);
  // Collective: every rank has its batches, or some rank is out of data, or newcomers wait.
  StepAgreement agree_on_step(bool have_batches);
  void run_step(std::vector<Batch>& micro, int64_t first_step, int64_t consumed, SampleLog& sample_log, Totals& t,
                const TrainCallbacks& cb);
  void log_step(const StepLoss& step_loss, float lr, size_t begin, int64_t first_step, Totals& t,
                const TrainCallbacks& cb);
  // What runs every K steps: checkpoint, evaluation, elastic snapshot.
  void run_scheduled_work(int64_t consumed, const TrainCallbacks& cb);
  void evaluate_and_report(TrainSummary& sum, const TrainCallbacks& cb);
  // At the end: rank 0 writes the model under --checkpoint-dir; --state-dump, every rank.
  void save_final_model();
  TrainSummary summarize(Totals& t, std::chrono::steady_clock::time_point start);
  // Collective (token mean): the step's target tokens over all ranks and micro-batches.
  double global_target_count(const std::vector<Batch>& micro) const;
  // Elastic (dist_trainer_elastic.cpp): leaves the failed (or, planned, the current)
  // communicator, forms the next generation and continues from its state.
  void reform(const std::string& why, bool planned, const TrainCallbacks& cb, Totals& t);
  // Collective work outside the steps (the epoch-end evaluation, the end of training):
  // under --elastic a peer failing in it makes the survivors re-form and run it again on
  // the new group, as a failed step is redone; otherwise the error ends the run.
  void outside_steps(const std::function<void()>& work, const TrainCallbacks& cb, Totals& t);
  // Collective on a new generation's communicator: every member takes the group's state
  // (ParallelStrategy::adopt_group_state; the last checkpoint when it cannot be had).
  // Returns the completed steps given up and whether the state came from disk.
  struct StateSync {
    int64_t lost_steps = 0;
    bool from_checkpoint = false;
  };
  StateSync sync_state(bool have_state, const TrainCallbacks& cb);
  // Elastic: the strategy keeps what a later failure needs (every K steps, and at once in
  // a new group).
  void elastic_snapshot();
  bool joiners_waiting();
  // straggler_evict: the rank of the straggler to evict at this agreement, or -1 (none
  // named; the group may not shrink below launch's MIN; the strategy takes no change now).
  // The same on every rank: the watch's state is (reset at every re-forming).
  int straggler_to_evict(const TrainCallbacks& cb);
  // The straggler leaves (ElasticEvicted, after taking part in the old group's snapshot);
  // the others re-form without it, planned.
  void evict_straggler(int rank, const TrainCallbacks& cb, Totals& t);
  // Elastic: the members marked the job done (false when the store cannot be asked).
  bool job_done();

  DistTrainConfig config_;
  Communicator* comm_;
  std::unique_ptr<Module> model_;
  std::unique_ptr<Dataset> train_, test_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<ParallelStrategy> strategy_;
  bool token_mean_ = false;      // the loss is the token mean (the dataset has ignored targets)
  std::unique_ptr<CommBatchStatsReducer> sync_bn_;  // --sync-bn
  std::unique_ptr<LossScaler> scaler_;              // --precision fp16
  // PyTorch's require_forward_param_sync: the last forward was a training forward of a
  // synchronising micro-step, so the next forward (training or evaluation) broadcasts
  // the buffers first.
  bool buffers_due_ = true;
  int64_t step_ = 0;
  mutable int64_t last_saved_step_ = -1;  // the step of the newest checkpoint this run wrote
  int epoch_ = 0;
  size_t position_ = 0;          // samples of epoch_'s order consumed by all ranks together (data/loading/sampler.h)
  int64_t switch_at_ = -1;
  std::function<std::unique_ptr<Communicator>()> make_switch_;
  std::unique_ptr<Communicator> owned_comm_;
  // Communicators a switch retired: the caller's first one is read live at the end (it
  // outlives the trainer); one the trainer owned is gone, so its count at retirement.
  struct Retired {
    const Communicator* live = nullptr;
    BackendTraffic at_retirement;
  };
  std::vector<Retired> retired_;
  void switch_communicator(const TrainCallbacks& cb);
  std::unique_ptr<ElasticContext> elastic_;
  std::chrono::steady_clock::time_point last_join_check_{};
  // Elastic: this process holds training state (a joiner only once it took the group's:
  // until then a re-form must not offer its untrained parameters as the group's).
  bool holds_state_ = true;
  AgreementCadence cadence_{config_.agreement_interval_s};  // when the world agrees before a step
  StragglerWatch straggler_{config_.straggler_ratio};       // rides on that agreement
  std::string straggler_line_;                              // to log after the agreement
  bool eviction_refusal_said_ = false;                      // "may not shrink below MIN", once per straggler
};

}  // namespace dpt
