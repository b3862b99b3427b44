#include "optim/dist_trainer.h"

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include "data/loader.h"
#include "data/make_dataset.h"
#include "data/sampler.h"
#include "comm/device/device_runtime.h"
#include "comm/device/staging.h"
#include "comm/launch_env.h"
#include "models/checkpoint.h"
#include "models/models.h"

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

// A checkpoint's metadata value, or an error naming the file and the key.
const std::string& required(const Metadata& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end()) throw CheckpointError(path, "metadata '" + key + "' is missing (not written by train?)");
  return it->second;
}

int64_t required_int(const Metadata& meta, const std::string& key, const std::string& path) {
  const std::string& v = required(meta, key, path);
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw CheckpointError(path, "metadata '" + key + "' is '" + v + "', not an integer");
}

// Points <dir>/latest at `target` so that it survives a crash or a power loss: write a
// temporary file, fsync it, rename it over `latest`, fsync the folder. Readers see the
// old or the new name, never a torn one.
void write_latest(const fs::path& dir, const std::string& target) {
  const fs::path tmp = dir / "latest.tmp", dst = dir / "latest";
  const std::string text = target + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  fs::rename(tmp, dst);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}
}  // namespace

DistTrainer::DistTrainer(DistTrainConfig config, Communicator& comm) : config_(std::move(config)), comm_(&comm) {
  if (config_.grad_accum < 1) throw std::invalid_argument("--grad-accum must be at least 1");
  if (config_.batch_size < 1) throw std::invalid_argument("--batch-size must be at least 1");
  model_ = make_model(config_.model, config_.model_config);
  // One GPU per local rank (LOCAL_RANK mod the devices here); ranks may share one.
  if (config_.device == "cuda") model_->to_cuda(device::for_local_rank(detect_launch().local_rank).index);
  else if (config_.device != "cpu") throw std::invalid_argument("--device '" + config_.device + "': valid are cpu, cuda");
  std::string ds = config_.dataset.empty() ? default_dataset(config_.model) : config_.dataset;
  if (ds == "synthetic") ds = config_.model == "toy" ? "synthetic-regression" : "synthetic-classification";
  DatasetOptions opts;
  opts.path = config_.data_dir;
  opts.seq_len = static_cast<size_t>(config_.model_config.seq_len);
  train_ = make_dataset(ds, Split::train, opts);
  test_ = make_dataset(ds, Split::test, opts);
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
  if (config_.resume && !load_latest_checkpoint())
    throw std::runtime_error("--resume: no checkpoint found in '" + config_.checkpoint_dir + "'");
  // Every rank starts from rank 0's parameters, verified by checksum (after a resume
  // too: a rank that read a different file is caught here).
  strategy_->broadcast_parameters();
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
  comm_ = &comm;
}

void DistTrainer::schedule_switch(int64_t at_step, std::function<std::unique_ptr<Communicator>()> make) {
  switch_at_ = at_step;
  make_switch_ = std::move(make);
}

std::string DistTrainer::final_model_path() const {
  return config_.checkpoint_dir.empty() ? "" : (fs::path(config_.checkpoint_dir) / "model.safetensors").string();
}

// Layout: <dir>/step_<N>/model.safetensors, the optimizer state beside it (DDP: one
// model.optim.safetensors written by rank 0, the replicas being identical; ZeRO: one
// model.optim.shard_<r>.safetensors per rank, zero_checkpoint.h), and <dir>/latest
// naming the newest complete step. Every file is written atomically, and `latest`
// moves only after a barrier that follows every rank's writes, so a kill during a
// save leaves the previous checkpoint loadable and `latest` never names a step with a
// missing file.
void DistTrainer::save_checkpoint(int64_t step, int epoch, int64_t batches_done) const {
  const fs::path dir = fs::path(config_.checkpoint_dir) / ("step_" + std::to_string(step));
  fs::create_directories(dir);
  const std::string model_path = (dir / "model.safetensors").string();
  strategy_->save_optimizer_state(model_path);
  strategy_->expose_full_parameters();  // ZeRO-3: the whole model; mixed precision: the masters
  if (comm_->rank() == 0)
    save_model(model_path, *model_,
               {{"step", std::to_string(step)},
                {"epoch", std::to_string(epoch)},
                {"batches_done", std::to_string(batches_done)},
                {"world_size", std::to_string(comm_->size())},
                {"zero_stage", std::to_string(strategy_->zero_stage())},
                {"model", config_.model}});
  comm_->barrier();  // every rank's files are in place before `latest` moves
  if (comm_->rank() == 0) write_latest(config_.checkpoint_dir, dir.filename().string());
  strategy_->restore_working_parameters();
  comm_->barrier();
}

bool DistTrainer::load_latest_checkpoint() {
  const fs::path latest = fs::path(config_.checkpoint_dir) / "latest";
  std::ifstream f(latest);
  std::string name;
  if (!(f >> name)) return false;
  const std::string model_path = (fs::path(config_.checkpoint_dir) / name / "model.safetensors").string();
  Metadata meta = load_model(model_path, *model_);
  // This rank's slice of whatever optimizer files the checkpoint holds (any stage, any
  // world size).
  strategy_->load_optimizer_state(model_path);
  step_ = required_int(meta, "step", model_path);
  start_epoch_ = int(required_int(meta, "epoch", model_path));
  skip_batches_ = required_int(meta, "batches_done", model_path);
  // A checkpoint from another world size: the data position is re-derived from the step.
  if (required_int(meta, "world_size", model_path) != comm_->size()) skip_batches_ = -1;
  return true;
}

EvalResult DistTrainer::evaluate() {
  // Sharded: rank r takes a contiguous slice of the held-out set; sums are reduced.
  const size_t total = config_.max_eval_samples ? std::min(config_.max_eval_samples, test_->size()) : test_->size();
  const size_t n = size_t(comm_->size()), r = size_t(comm_->rank());
  const size_t lo = total * r / n, hi = total * (r + 1) / n;
  EvalSums sums = evaluate_slice(*model_, *test_, lo, hi, kEvalBatch);
  // Collective forwards (ZeRO-3 gathers every layer): ranks with fewer batches than
  // the largest slice (ceil(total / n) samples) run throwaway forwards.
  if (strategy_->collective_forward() && total > 0) {
    const size_t rounds = ((total + n - 1) / n + kEvalBatch - 1) / kEvalBatch;
    const size_t mine = (hi - lo + kEvalBatch - 1) / kEvalBatch;
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

TrainSummary DistTrainer::run(const TrainCallbacks& cb) {
  TrainSummary sum;
  const int n = comm_->size(), r = comm_->rank();
  const auto t_start = Clock::now();
  double train_time = 0;
  int64_t samples_done = 0, steps_run = 0, comm_bytes = 0;
  PcieBytes pcie_total;
  std::vector<Batch> micro(size_t(config_.grad_accum));
  bool done = config_.steps > 0 && step_ >= config_.steps;
  bool evaluated_at_end = false;
  for (int epoch = start_epoch_; epoch < config_.epochs && !done; ++epoch) {
    DistributedSampler sampler(train_->size(), n, r, config_.shuffle, config_.seed, false);
    sampler.set_epoch(uint64_t(epoch));
    DataLoader loader(*train_, sampler, config_.batch_size, false, 2);
    loader.reset(uint64_t(epoch));
    int64_t consumed = 0;
    if (epoch == start_epoch_ && skip_batches_ != 0) {
      // Resume: skip what the checkpointed run already used. From another world size
      // the position is re-derived from the step count.
      int64_t skip = skip_batches_ >= 0 ? skip_batches_
                                         : int64_t(step_ * config_.grad_accum) % int64_t(std::max<size_t>(1, loader.num_batches()));
      Batch b;
      for (int64_t i = 0; i < skip && loader.next(b); ++i) ++consumed;
    }
    for (;;) {
      if (config_.steps > 0 && step_ >= config_.steps) { done = true; break; }
      if (step_ == switch_at_ && make_switch_) {
        auto next = make_switch_();
        set_communicator(*next);
        owned_comm_ = std::move(next);  // the previous owned one (if any) is idle: drop it
        if (cb.on_event) cb.on_event("switched to backend " + comm_->backend_name() + " after step " + std::to_string(step_));
      }
      int fetched = 0;
      const bool starved = r == config_.uneven_rank && consumed >= config_.uneven_batches;
      if (!starved)
        for (auto& b : micro) fetched += loader.next(b) ? 1 : 0;
      int32_t all_have = fetched == config_.grad_accum ? 1 : 0;
      comm_->allreduce(make_buffer(&all_have, 1), ReduceOp::min);
      if (!all_have) {
        // Uneven inputs: some rank is out of data; everyone ends the epoch here.
        Batch b;
        int64_t left = fetched;
        while (!starved && loader.next(b)) ++left;
        sum.skipped_batches += left;
        break;
      }
      consumed += config_.grad_accum;

      // ---- one step: micro-steps of forward/backward, gradient sync, update ----
      const auto t0 = Clock::now();
      const PcieBytes pcie0 = pcie_so_far(*model_);
      strategy_->zero_grad();
      double loss_sum = 0, samples = 0;
      for (int m = 0; m < config_.grad_accum; ++m) {
        strategy_->begin_backward(m == config_.grad_accum - 1);
        model_->forward(model_input(micro[m]), true);
        const float loss = model_->loss(model_target(micro[m]), 1.0f / float(config_.grad_accum));
        model_->backward();
        loss_sum += double(loss) * double(micro[m].n);
        samples += double(micro[m].n);
      }
      const float lr = schedule_->lr(step_);
      strategy_->end_backward();
      if (config_.clip_norm > 0) strategy_->clip_grad_norm(config_.clip_norm);
      strategy_->step(lr);
      const CommStats& cs = strategy_->last_stats();
      const PcieBytes pcie1 = pcie_so_far(*model_);
      pcie_total.to_host += pcie1.to_host - pcie0.to_host;
      pcie_total.to_device += pcie1.to_device - pcie0.to_device;
      ++step_;
      ++steps_run;
      const double dt = since(t0);
      train_time += dt;
      samples_done += int64_t(samples);
      sum.comm_s += cs.comm_s;
      sum.exposed_s += cs.exposed_s;
      comm_bytes += cs.bytes;

      const bool log_now = config_.log_every > 0 && (step_ % config_.log_every == 0 || steps_run == 1);
      if (log_now) {
        double ls[2] = {loss_sum, samples};  // mean over all ranks' samples
        comm_->allreduce(Buffer{ls, 2, DType::f64, {}}, ReduceOp::sum);
        StepLog l{step_, epoch, ls[0] / ls[1], lr, double(samples_done) * n / std::max(train_time, 1e-9),
                  cs.comm_s, cs.exposed_s, cs.bytes};
        sum.last_loss = l.loss;
        if (cb.on_log) cb.on_log(l);
      }
      if (!config_.checkpoint_dir.empty() && config_.save_every > 0 && step_ % config_.save_every == 0)
        save_checkpoint(step_, epoch, consumed);
      if (config_.eval_every > 0 && step_ % config_.eval_every == 0 && cb.on_eval) cb.on_eval(step_, evaluate());
      if (config_.exit_after_step > 0 && step_ == config_.exit_after_step)
        throw SimulatedCrash(step_);  // the tool turns this into an abrupt death
    }
    if (config_.eval_every == 0 && !done) {
      sum.eval = evaluate();
      evaluated_at_end = true;
      if (cb.on_eval) cb.on_eval(step_, sum.eval);
    } else {
      evaluated_at_end = false;
    }
  }
  strategy_->settle();
  if (!evaluated_at_end) {
    sum.eval = evaluate();
    if (cb.on_eval) cb.on_eval(step_, sum.eval);
  }
  if (!config_.checkpoint_dir.empty()) {
    strategy_->expose_full_parameters();
    if (comm_->rank() == 0) {
      fs::create_directories(config_.checkpoint_dir);
      save_model(final_model_path(), *model_, {{"step", std::to_string(step_)}});
    }
    strategy_->restore_working_parameters();
    comm_->barrier();
  }
  sum.backend = comm_->backend_name();
  sum.steps = step_;
  sum.time_s = since(t_start);
  sum.samples_per_s = double(samples_done) * n / std::max(train_time, 1e-9);
  sum.step_s = steps_run > 0 ? train_time / double(steps_run) : 0;
  sum.comm_bytes_per_step = steps_run > 0 ? double(comm_bytes) / double(steps_run) : 0;
  if (steps_run > 0) sum.pcie_per_step = {pcie_total.to_host / uint64_t(steps_run), pcie_total.to_device / uint64_t(steps_run)};
  return sum;
}

}  // namespace dpt
