#include "train/dist_trainer.h"
#include "train/make_strategy.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "comm/device/staging.h"
#include "comm/dispatch/flight_recorder.h"
#include "comm/launch/launch_env.h"
#include "data/loading/loader.h"
#include "data/make_dataset.h"
#include "data/loading/sampler.h"
#include "device/runtime.h"
#include "models/io/checkpoint.h"
#include "models/kernels/cpu/gemm.h"
#include "models/zoo/gpt2.h"
#include "models/zoo/models.h"
#include "train/init_from.h"
#include "train/memory_check.h"

namespace dpt {
namespace fs = std::filesystem;

namespace {
using Clock = std::chrono::steady_clock;

PcieBytes pcie_so_far(const Module& model) {
  const device::StagedBytes staged = device::staged_bytes();
  ParamStore& store = const_cast<Module&>(model).store();
  return {store.downloaded_bytes() + staged.to_host, store.uploaded_bytes() + staged.to_device};
}
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ZeRO-3 builds only this rank's shard of the parameters (param_store.h), so no rank
// ever holds the whole model; not under --elastic, where a re-formed group of another
// size needs the whole model on every rank (dist_trainer_elastic.cpp).
bool builds_sharded(const DistTrainConfig& c) { return c.parallel.zero_stage == 3 && !c.elastic && !c.make_model; }

// What the job will hold per rank (memory_check.h): gpt2 from its shape (`built` may be
// null), any other model from the built one (no activation estimate: they are small).
MemoryNeed memory_need(const DistTrainConfig& c, const Module* built) {
  MemoryNeed n;
  n.sharded_build = builds_sharded(c);
  n.state_per_param = optimizer_state_per_param(c.optimizer, c.optimizer_config.momentum, c.parallel.precision != DType::f32);  // bf16/fp16: fp32 masters too
  if (c.model == "gpt2") {
    n.params = double(gpt2_param_count(c.model_config));
    n.largest_layer = double(gpt2_largest_layer_params(c.model_config));
    // An evaluation forward larger than the training batch holds (part of) its own. With
    // --device cuda the activations are device tensors: none of them is host memory.
    if (c.device != "cuda")
      n.activation_bytes = gpt2_activation_bytes(c.model_config, int64_t(std::max(c.batch_size, c.eval_batch_size)));
  } else {
    n.params = double(built->num_params());
    for (const ParamInfo& p : built->param_infos()) n.largest_layer = std::max(n.largest_layer, double(p.numel));
  }
  return n;
}

}  // namespace

DistTrainer::DistTrainer(DistTrainConfig config, Communicator& comm) : config_(std::move(config)), comm_(&comm) {
  if (config_.grad_accum < 1) throw std::invalid_argument("--grad-accum must be at least 1");
  if (config_.batch_size < 1) throw std::invalid_argument("--batch-size must be at least 1");
  if (config_.device != "cpu" && config_.device != "cuda")
    throw std::invalid_argument("--device '" + config_.device + "': valid are cpu, cuda");
  // Refuse, before the big allocations, a job this host cannot hold (memory_check.h).
  // gpt2's footprint follows from its shape: checked before anything is loaded or built.
  auto check_memory = [&] {
    if (config_.memory_check)
      check_memory_fits(comm, memory_need(config_, model_.get()), config_.parallel.zero_stage,
                        detect_launch().local_size, !config_.elastic_join);
  };
  if (config_.model == "gpt2") check_memory();
  if (config_.make_dataset) {
    train_ = config_.make_dataset(Split::train);
    test_ = config_.make_dataset(Split::test);
  } else {
    std::string ds = config_.dataset.empty() ? default_dataset(config_.model) : config_.dataset;
    if (ds == "synthetic") ds = config_.model == "toy" ? "synthetic-regression" : "synthetic-classification";
    if (const std::string note = dataset_note(config_.model, ds); !note.empty() && comm.rank() == 0)
      std::printf("%s\n", note.c_str()), std::fflush(stdout);
    DatasetOptions opts;
    opts.path = config_.data_dir;
    opts.jsonl_field = config_.jsonl_field;
    opts.tokenizer_dir = config_.tokenizer_dir;
    opts.seq_len = static_cast<size_t>(config_.model_config.seq_len);
    opts.val_fraction = config_.val_fraction;
    opts.val_path = config_.val_file;
    opts.image = config_.image;
    train_ = make_dataset(ds, Split::train, opts);
    opts.image.augment = Augment::none;  // held-out data is never augmented
    test_ = make_dataset(ds, Split::test, opts);
  }
  token_mean_ = train_->has_ignored_targets();
  // The model's input channels and image size come from the data (as in train_local).
  adapt_model_to_images(*train_, config_.model_config);
  set_model_classes(*train_, config_.num_classes, config_.model_config);
  ModelConfig model_config = config_.model_config;
  if (builds_sharded(config_)) {
    model_config.resident_rank = comm.rank();
    model_config.resident_world = comm.size();
  }
  model_ = config_.make_model ? config_.make_model(model_config) : make_model(config_.model, model_config);
  // A model that learns its input shape at its first forward (the public API's) learns it
  // from the data now: the configuration printed before training shows it, and a model
  // that does not fit the data fails here, before any collective.
  if (model_->learns_sample_shape()) {
    Batch probe;
    const size_t first = 0;
    train_->fill(std::span<const size_t>(&first, 1), probe);
    model_->adopt_sample_shape(probe.sample_shape);
  }
  // Every rank reads the file (a sharded build keeps its shard of each tensor); before
  // the device copy, the strategy and the first collective, so a refusal stops every rank alike.
  if (!config_.init_from.empty()) {
    const std::string note =
        load_init_from(config_.init_from, config_.model, *model_, config_.num_classes > 0, train_->name());
    if (!note.empty() && comm.rank() == 0) std::printf("%s\n", note.c_str()), std::fflush(stdout);
  }
  if (config_.model != "gpt2") check_memory();  // the other models are small: measured once built
  // One GPU per local rank (LOCAL_RANK mod the devices here); ranks may share one.
  if (config_.device == "cuda") model_->to_cuda(device::for_local_rank(detect_launch().local_rank).index);
  if (config_.parallel.precision == DType::f16) {
    // fp16 activations and gradients (rounded to fp16, on the CPU or by a kernel on
    // CUDA: overflow and underflow are real); the strategy keeps fp16 working weights and
    // fp32 masters.
    model_->set_compute_precision(ComputePrecision::kF16);
    scaler_ = std::make_unique<LossScaler>(config_.loss_scaler);
    // On CUDA the matrix products take fp16 operands on tensor cores (fp32 accumulation),
    // as autocast runs them; the CPU has no fp16 product and keeps fp32 on the rounded values.
    if (config_.device == "cuda") {
      model_->set_gemm_precision(GemmPrecision::f16);
      if (comm.rank() == 0)
        std::fprintf(stderr, "--precision fp16: fp16 GEMM: cuBLASLt on tensor cores (fp16 operands, fp32 "
                             "accumulation)\n");
    }
  }
  if (config_.parallel.precision == DType::bf16) {
    // bf16 working weights (the strategy; device-resident DDP keeps fp32 device masters
    // instead, as autocast does) and every matrix product with bf16 operands and
    // fp32 accumulation: on CUDA through cuBLASLt on tensor cores, on a CPU with AMX or
    // AVX512-BF16 through oneDNN (models/kernels/cpu/gemm.h); on other CPUs the products stay fp32,
    // and this line says so.
    model_->set_gemm_precision(GemmPrecision::bf16);
    if (comm.rank() == 0) {
      std::fprintf(stderr, "--precision bf16: %s\n",
                   config_.device == "cuda" ? "bf16 GEMM: cuBLASLt on tensor cores (bf16 operands, fp32 accumulation)"
                                            : bf16_gemm_description().c_str());
      // Native bf16 is slower than fp32 on CPUs without AMX: measured here, and said.
      if (config_.device != "cuda")
        if (const std::string note = bf16_speed_note(); !note.empty())
          std::fprintf(stderr, "--precision bf16: %s\n", note.c_str());
    }
  }
  if (config_.sync_bn) {  // over the strategy's gradient group, once the strategy is made
    sync_bn_ = std::make_unique<CommBatchStatsReducer>(*comm_);
    model_->set_batch_stats_reducer(sync_bn_.get());
  }
  if (config_.lr_schedule == "cosine") {
    // The cosine reaches its floor at the end of the run: steps, or all epochs' steps.
    const size_t n = size_t(comm.size());
    const int64_t per_epoch = int64_t((train_->size() + n - 1) / n + config_.batch_size - 1) /
                              int64_t(config_.batch_size) / config_.grad_accum;
    config_.lr_config.total_steps = config_.steps > 0 ? config_.steps : std::max<int64_t>(1, per_epoch * config_.epochs);
  }
  schedule_ = make_lr_schedule(config_.lr_schedule, config_.lr_config);
  // The strategy builds the optimizer for the elements it owns (all of them in DDP,
  // this rank's shard in ZeRO).
  strategy_ = make_strategy(config_.parallel, *model_, *comm_, [this](size_t numel) {
    return make_optimizer(config_.optimizer, config_.optimizer_config, numel);
  });
  // SyncBatchNorm's batch statistics are those of the ranks whose gradients are averaged:
  // the world, or DiLoCo's inner group (between round ends nothing crosses the groups).
  if (sync_bn_) sync_bn_->set_communicator(strategy_->gradient_group());
  if (config_.elastic_join) return;  // the members' state arrives in run() (sync_state)
  if (config_.resume && !load_latest_checkpoint())
    throw std::runtime_error("--resume: no checkpoint found in '" + config_.checkpoint_dir + "'");
  if (config_.auto_resume && comm_->rank() == 0) {
    // The same script runs first and after every requeue: say which this is.
    if (load_latest_checkpoint())
      std::printf("auto-resume: continuing from step %lld of '%s'\n", (long long)step_, config_.checkpoint_dir.c_str());
    else
      std::printf("auto-resume: no checkpoint in '%s' yet: starting at step 0\n", config_.checkpoint_dir.c_str());
    std::fflush(stdout);
  } else if (config_.auto_resume) {
    load_latest_checkpoint();
  }
  // Every rank starts from rank 0's parameters, verified by checksum (after a resume
  // too: a rank that read a different file is caught here), and its buffers (PyTorch DDP
  // syncs the module states at construction whatever broadcast_buffers says; over the
  // gradient group: DiLoCo resumed mid-round keeps each group's own).
  strategy_->broadcast_parameters();
  strategy_->broadcast_buffers();
}

ModelStateBytes DistTrainer::memory_bytes() const {
  ModelStateBytes m = strategy_->memory_bytes();
  if (config_.model == "gpt2") {
    const MemoryNeed n = memory_need(config_, model_.get());
    m.activations_estimate = n.activation_bytes;
    m.planned = rank_bytes(n, config_.parallel.zero_stage, comm_->size());
  }
  return m;
}

DistTrainer::~DistTrainer() {
  // The strategy may hold work in flight on owned_comm_: it settles first.
  strategy_.reset();
}

void DistTrainer::set_communicator(Communicator& comm) {
  if (comm.size() != comm_->size() || comm.rank() != comm_->rank())
    throw std::invalid_argument("backend switch: the new communicator has rank " + std::to_string(comm.rank()) + " of " +
                                std::to_string(comm.size()) + ", the old one " + std::to_string(comm_->rank()) + " of " +
                                std::to_string(comm_->size()));
  strategy_->set_communicator(comm);
  if (sync_bn_) sync_bn_->set_communicator(strategy_->gradient_group());  // made anew over `comm` (DiLoCo)
  comm_ = &comm;
}

// The scheduled backend switch: the strategy and SyncBatchNorm move to the new
// communicator, and the old one is retired, so anything still holding it fails loudly
// instead of quietly carrying traffic on the backend the user switched away from.
void DistTrainer::switch_communicator(const TrainCallbacks& cb) {
  auto next = make_switch_();
  Communicator& old = *comm_;
  set_communicator(*next);
  const std::string why = "switched to backend " + comm_->backend_name() + " after step " + std::to_string(step_);
  old.retire(why);
  const Traffic carried = old.traffic();
  const bool owned = &old == owned_comm_.get();
  retired_.push_back({owned ? nullptr : &old, {old.backend_name(), carried, true}});
  owned_comm_ = std::move(next);  // the previous owned one (if any) is retired: drop it
  if (cb.on_event)
    cb.on_event(why + " (" + old.backend_name() + " retired after carrying " + std::to_string(carried.bytes_sent) +
                " bytes sent, " + std::to_string(carried.bytes_received) + " received)");
}

void DistTrainer::schedule_switch(int64_t at_step, std::function<std::unique_ptr<Communicator>()> make) {
  switch_at_ = at_step;
  make_switch_ = std::move(make);
}

EvalResult DistTrainer::evaluate() {
  set_flight_phase("eval");  // every evaluation, the final one too (the timeline's lane)
  // Sharded: rank r takes a contiguous slice of the held-out set; sums are reduced.
  const size_t total = config_.max_eval_samples ? std::min(config_.max_eval_samples, test_->size()) : test_->size();
  const size_t n = size_t(comm_->size()), r = size_t(comm_->rank());
  const size_t lo = total * r / n, hi = total * (r + 1) / n;
  // PyTorch's DDP forward broadcasts the buffers in evaluation too when the last
  // training forward synchronised; a no-grad forward then clears the flag. So every
  // rank's slice is evaluated with rank 0's running statistics (DiLoCo: its inner group's
  // first rank's, which at the end of the run, after the outer step, are every rank's).
  if (config_.broadcast_buffers && buffers_due_) strategy_->broadcast_buffers();
  buffers_due_ = false;
  const size_t eval_batch = config_.eval_batch_size ? config_.eval_batch_size
                           : config_.model == "gpt2"  ? config_.batch_size
                                                      : kEvalBatch;
  EvalSums sums = evaluate_slice(*model_, *test_, lo, hi, eval_batch);
  // Collective forwards (ZeRO-3 gathers every layer): ranks with fewer batches than
  // the largest slice (ceil(total / n) samples) run throwaway forwards.
  if (strategy_->collective_forward() && total > 0) {
    const size_t rounds = ((total + n - 1) / n + eval_batch - 1) / eval_batch;
    const size_t mine = (hi - lo + eval_batch - 1) / eval_batch;
    Batch batch;
    std::vector<size_t> idx(1, 0);
    for (size_t k = mine; k < rounds; ++k) {
      test_->fill(idx, batch);
      model_->forward(model_input(batch), false);
    }
  }
  strategy_->zero_grad();
  comm_->allreduce(Buffer{sums.data(), EvalSums::kCount, DType::f64, {}}, ReduceOp::sum);
  return eval_result(sums);
}

double DistTrainer::global_target_count(const std::vector<Batch>& micro) const {
  double count = 0;
  for (const Batch& b : micro) count += double(count_targets(b));
  // Over the ranks whose gradients are averaged (DiLoCo: the inner group).
  strategy_->gradient_group().allreduce(Buffer{&count, 1, DType::f64, {}}, ReduceOp::sum);
  return count;
}

DistTrainer::StepLoss DistTrainer::train_step(std::vector<Batch>& micro, Totals& t, float lr, const TrainCallbacks& cb) {
  auto phase = [&](const char* what) {
    set_flight_phase(what);  // the flight recorder files this step's collectives under it
    if (cb.on_phase) cb.on_phase(step_ + 1, what);
  };
  const auto t0 = Clock::now();
  set_flight_step(step_ + 1);
  const PcieBytes pcie0 = pcie_so_far(*model_);
  // Token mean: world / (global targets), so the strategies' average over the ranks
  // leaves the gradient of the mean over every target of the global batch.
  const double targets = token_mean_ ? global_target_count(micro) : 0;
  const float token_scale = targets > 0 ? float(double(strategy_->gradient_group().size()) / targets) : 0.0f;
  strategy_->zero_grad();
  StepLoss out;
  Clock::time_point compute_from = Clock::now();  // the first forward (after any buffers' broadcast)
  // fp16: the loss scaler's factor multiplies the gradient (not the reported loss).
  const float loss_scale = scaler_ ? scaler_->scale() : 1.0f;
  for (int m = 0; m < config_.grad_accum; ++m) {
    const Batch& b = micro[size_t(m)];
    const bool sync = m == config_.grad_accum - 1;
    strategy_->begin_backward(sync);
    // PyTorch DDP's rule: a training forward broadcasts rank 0's buffers when the
    // previous one synchronised gradients, i.e. before each step's first micro-step and
    // not before the later no-sync ones.
    if (config_.broadcast_buffers && buffers_due_) strategy_->broadcast_buffers();
    buffers_due_ = sync;
    phase("forward");
    if (m == 0) compute_from = Clock::now();
    model_->forward(model_input(b), true);
    if (token_mean_) {
      const LossSum l = model_->loss_sum(model_target(b), token_scale * loss_scale);
      out.sum += l.sum;
      out.weight += double(l.count);
    } else {
      const float loss = model_->loss(model_target(b), loss_scale / float(config_.grad_accum));
      out.sum += double(loss) * double(b.n);
      out.weight += double(b.n);
    }
    phase("backward");
    model_->backward();
    out.samples += double(b.n);
  }
  phase("sync");
  double compute_s = since(compute_from);  // forward and backward; the update is added below
  strategy_->end_backward();
  if (config_.count_zero_grads) {
    const auto g = strategy_->owned_grads();
    t.zero_grads += double(std::count(g.begin(), g.end(), 0.0f));
    t.grads_seen += double(g.size());
  }
  if (comm_->rank() == config_.inject_inf_rank && step_ + 1 == config_.inject_inf_step)
    strategy_->poison_owned_grad();  // test hook
  // fp16: unscale (where the gradients live), and every rank agrees whether any gradient
  // overflowed (GradScaler).
  const bool skip = scaler_ && scaler_->agree_on_skip(strategy_->unscale_owned_grads(scaler_->inverse_scale()), *comm_);
  if (!skip && config_.clip_norm > 0) strategy_->clip_grad_norm(config_.clip_norm);
  phase("update");
  const auto update_from = Clock::now();
  if (skip) strategy_->skip_step();
  else strategy_->step(lr);
  compute_s += since(update_from);
  straggler_.add_compute(compute_s);
  if (scaler_) scaler_->update(skip);
  const CommStats& cs = strategy_->last_stats();
  const PcieBytes pcie1 = pcie_so_far(*model_);
  t.pcie.to_host += pcie1.to_host - pcie0.to_host;
  t.pcie.to_device += pcie1.to_device - pcie0.to_device;
  ++step_;
  ++t.steps_run;
  t.train_time += since(t0);
  t.samples_done += int64_t(out.samples);
  t.sum.comm_s += cs.comm_s;
  t.sum.exposed_s += cs.exposed_s;
  t.comm_bytes += cs.bytes;
  return out;
}

// run() and its steps: dist_trainer_loop.cpp.

}  // namespace dpt
