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
#include "comm/launch_env.h"
#include "models/checkpoint.h"
#include "models/models.h"
#include "optim/clip_grad.h"
#include "optim/local_trainer.h"
#include "optim/wire16.h"
#include "optim/zero_checkpoint.h"
#include "optim/zero_pages.h"

namespace dpt {
namespace fs = std::filesystem;

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string default_dataset(const std::string& model) {
  if (model == "gpt") return "text";
  if (model == "toy") return "synthetic-regression";
  return "fashion-mnist";
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
  if (config_.zero_stage < 0 || config_.zero_stage > 3)
    throw std::invalid_argument("--zero " + std::to_string(config_.zero_stage) + ": valid stages are 0, 1, 2, 3");
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
  // ZeRO: the optimizer holds (and steps) only this rank's shard.
  const size_t opt_numel = config_.zero_stage > 0 ? ShardLayout(model_->num_params(), comm.size()).shard : model_->num_params();
  optimizer_ = make_optimizer(config_.optimizer, config_.optimizer_config, opt_numel);
  if (config_.lr_schedule == "cosine") {
    // The cosine reaches its floor at the end of the run: steps, or all epochs' steps.
    const size_t n = size_t(comm.size());
    const int64_t per_epoch = int64_t((train_->size() + n - 1) / n + config_.batch_size - 1) /
                              int64_t(config_.batch_size) / config_.grad_accum;
    config_.lr_config.total_steps = config_.steps > 0 ? config_.steps : std::max<int64_t>(1, per_epoch * config_.epochs);
  }
  schedule_ = make_lr_schedule(config_.lr_schedule, config_.lr_config);
  if (config_.precision != DType::f32 && config_.precision != DType::bf16)
    throw std::invalid_argument(std::string("--precision ") + dtype_name(config_.precision) + ": valid are fp32, bf16");
  if (config_.zero_stage > 0)
    zero_ = std::make_unique<ZeroOptimizer>(*model_, *comm_, config_.zero_stage, *optimizer_, config_.ddp, config_.precision);
  else
    ddp_ = std::make_unique<DistributedDataParallel>(*model_, *comm_, config_.ddp);
  if (!zero_ && config_.precision == DType::bf16) master_ = std::make_unique<MasterWeights>();
  if (config_.resume && !load_latest_checkpoint())
    throw std::runtime_error("--resume: no checkpoint found in '" + config_.checkpoint_dir + "'");
  // Every rank starts from rank 0's parameters, verified by checksum (after a resume
  // too: a rank that read a different file is caught here).
  if (zero_) zero_->broadcast_parameters();
  else ddp_->broadcast_parameters();
  if (master_) master_->adopt(model_->flat_params());
}

void DistTrainer::full_precision_parameters() const {
  if (zero_) zero_->gather_all_parameters();
  else if (master_) master_->expose(model_->flat_params());
}

void DistTrainer::working_parameters() const {
  if (zero_) zero_->release_parameters();
  else if (master_) round_bf16(model_->flat_params());
}

DistTrainer::~DistTrainer() {
  // A parameter refresh may still be in flight: let it land while its communicator
  // (possibly owned_comm_, destroyed right after this body) is alive.
  if (zero_) try {
      zero_->settle();
    } catch (const std::exception&) {
      // The communicator failed; its error was reported where it happened.
    }
}

void DistTrainer::set_communicator(Communicator& comm) {
  if (comm.size() != comm_->size() || comm.rank() != comm_->rank())
    throw std::invalid_argument("backend switch: the new communicator has rank " + std::to_string(comm.rank()) + " of " +
                                std::to_string(comm.size()) + ", the old one " + std::to_string(comm_->rank()) + " of " +
                                std::to_string(comm_->size()));
  if (zero_) zero_->set_communicator(comm);
  else ddp_->set_communicator(comm);
  comm_ = &comm;
}

void DistTrainer::schedule_switch(int64_t at_step, std::function<std::unique_ptr<Communicator>()> make) {
  switch_at_ = at_step;
  make_switch_ = std::move(make);
}

std::string DistTrainer::final_model_path() const {
  return config_.checkpoint_dir.empty() ? "" : (fs::path(config_.checkpoint_dir) / "model.safetensors").string();
}

// Layout: <dir>/step_<N>/model.safetensors (+ model.optim.safetensors) and <dir>/latest
// naming the newest complete one. Rank 0 writes (DDP replicas are identical); each file
// is written atomically, and `latest` moves only after both files are in place, so a
// kill during a save leaves the previous checkpoint loadable.
// ZeRO: every rank first writes its optimizer shard, a barrier, then rank 0 writes the
// model and moves `latest` as above, so `latest` never names a step with a missing shard.
void DistTrainer::save_checkpoint(int64_t step, int epoch, int64_t batches_done) const {
  if (zero_) {
    const fs::path dir = fs::path(config_.checkpoint_dir) / ("step_" + std::to_string(step));
    fs::create_directories(dir);
    const std::string model_path = (dir / "model.safetensors").string();
    save_optimizer_shard(model_path, *optimizer_, zero_->layout(), comm_->rank());
    full_precision_parameters();  // stage 3: rank 0 writes the whole model; bf16: the masters
    if (comm_->rank() == 0) {
      save_model(model_path, *model_,
                 {{"step", std::to_string(step)},
                  {"epoch", std::to_string(epoch)},
                  {"batches_done", std::to_string(batches_done)},
                  {"world_size", std::to_string(comm_->size())},
                  {"zero_stage", std::to_string(config_.zero_stage)},
                  {"model", config_.model}});
    }
    comm_->barrier();  // every shard and the model are in place before `latest` moves
    if (comm_->rank() == 0) write_latest(config_.checkpoint_dir, dir.filename().string());
    working_parameters();
    comm_->barrier();
    return;
  }
  full_precision_parameters();
  if (comm_->rank() == 0) {
    const fs::path dir = fs::path(config_.checkpoint_dir) / ("step_" + std::to_string(step));
    fs::create_directories(dir);
    Metadata meta = {{"step", std::to_string(step)},
                     {"epoch", std::to_string(epoch)},
                     {"batches_done", std::to_string(batches_done)},
                     {"world_size", std::to_string(comm_->size())},
                     {"model", config_.model}};
    const std::string model_path = (dir / "model.safetensors").string();
    save_model(model_path, *model_, meta);
    std::vector<NamedTensorView> state;
    for (auto& [name, span] : optimizer_->state_buffers())
      state.push_back({name, {int64_t(span.size())}, span});
    save_safetensors(sidecar_path(model_path, "optim"), state,
                     {{"optimizer", optimizer_->name()}, {"step_count", std::to_string(optimizer_->step_count())}});
    write_latest(config_.checkpoint_dir, dir.filename().string());
  }
  working_parameters();
  comm_->barrier();
}

bool DistTrainer::load_latest_checkpoint() {
  const fs::path latest = fs::path(config_.checkpoint_dir) / "latest";
  std::ifstream f(latest);
  std::string name;
  if (!(f >> name)) return false;
  const std::string model_path = (fs::path(config_.checkpoint_dir) / name / "model.safetensors").string();
  Metadata meta = load_model(model_path, *model_);
  const std::string optim_path = sidecar_path(model_path, "optim");
  if (zero_ || !fs::exists(optim_path)) {
    // This rank's shard (ZeRO), or everything from a ZeRO run's shard files (DDP):
    // the overlapping slices of whatever files the checkpoint holds.
    const int r = zero_ ? comm_->rank() : 0;
    const ShardLayout mine = zero_ ? zero_->layout() : ShardLayout(model_->num_params(), 1);
    load_optimizer_range(model_path, *optimizer_, std::min(mine.begin(r), mine.numel), mine.real_numel(r));
  } else {
    SafetensorsContents st = load_safetensors(optim_path);
    if (st.metadata["optimizer"] != optimizer_->name())
      throw CheckpointError(optim_path, "holds state of optimizer '" + st.metadata["optimizer"] + "', this run uses '" +
                                            optimizer_->name() + "'");
    for (auto& [bname, span] : optimizer_->state_buffers()) {
      const NamedTensor* t = st.find(bname);
      if (!t || t->data.size() != span.size())
        throw CheckpointError(optim_path, "missing or mis-sized optimizer state '" + bname + "'");
      std::copy(t->data.begin(), t->data.end(), span.begin());
    }
    optimizer_->set_step_count(std::stoll(st.metadata["step_count"]));
  }
  step_ = std::stoll(meta.at("step"));
  start_epoch_ = std::stoi(meta.at("epoch"));
  skip_batches_ = std::stoll(meta.at("batches_done"));
  // A checkpoint from another world size: the data position is re-derived from the step.
  if (std::stoi(meta.at("world_size")) != comm_->size()) skip_batches_ = -1;
  return true;
}

EvalResult DistTrainer::evaluate() {
  // Sharded: rank r takes a contiguous slice of the held-out set; sums are reduced.
  const size_t total = config_.max_eval_samples ? std::min(config_.max_eval_samples, test_->size()) : test_->size();
  const size_t n = size_t(comm_->size()), r = size_t(comm_->rank());
  const size_t lo = total * r / n, hi = total * (r + 1) / n;
  double sums[3] = {0, 0, 0};  // loss * samples, correct, samples
  bool classifier = false;
  Batch batch;
  std::vector<size_t> idx;
  for (size_t start = lo; start < hi; start += 256) {
    const size_t count = std::min<size_t>(256, hi - start);
    idx.resize(count);
    std::iota(idx.begin(), idx.end(), start);
    test_->fill(idx, batch);
    model_->forward(model_input(batch), false);
    sums[0] += double(model_->loss(model_target(batch))) * double(count);
    sums[2] += double(count);
    if (!batch.labels.empty() && !model_->takes_tokens() && batch.labels.size() == count) {
      const Tensor& out = model_->host_output();
      classifier = true;
      const int64_t c = out.last_dim();
      for (size_t i = 0; i < count; ++i) {
        const float* row = out.data() + i * size_t(c);
        sums[1] += double(std::max_element(row, row + c) - row == batch.labels[i]);
      }
    }
  }
  // ZeRO-2/3 keep the flat gradients zero and released between steps; touching them
  // here would make every page resident again.
  // ZeRO-3: every forward gathers parameters collectively, so ranks with fewer eval
  // batches than the largest slice (ceil(total / n) samples) run throwaway forwards.
  if (config_.zero_stage == 3 && total > 0) {
    const size_t rounds = ((total + n - 1) / n + 255) / 256;
    const size_t mine = (hi - lo + 255) / 256;
    idx.assign(1, 0);
    for (size_t k = mine; k < rounds; ++k) {
      test_->fill(idx, batch);
      model_->forward(model_input(batch), false);
    }
  }
  if (config_.zero_stage < 2) model_->zero_grad();
  else model_->zero_device_grad();  // the host buffer is zero already; the CUDA mirror is not
  comm_->allreduce(Buffer{sums, 3, DType::f64, {}}, ReduceOp::sum);
  EvalResult e;
  e.samples = size_t(sums[2]);
  e.loss = sums[2] > 0 ? sums[0] / sums[2] : 0;
  if (classifier && sums[2] > 0) e.accuracy = sums[1] / sums[2];
  return e;
}

TrainSummary DistTrainer::run(const std::function<void(const StepLog&)>& on_log,
                              const std::function<void(int64_t, const EvalResult&)>& on_eval) {
  TrainSummary sum;
  const int n = comm_->size(), r = comm_->rank();
  const auto t_start = Clock::now();
  double train_time = 0;
  int64_t samples_done = 0, steps_run = 0, comm_bytes = 0;
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
      if (config_.zero_stage < 2) model_->zero_grad();  // ZeRO-2/3: already zero (zero_grad_reducer.h)
      else model_->zero_device_grad();                 // ... except for the CUDA mirror
      double loss_sum = 0, samples = 0;
      for (int m = 0; m < config_.grad_accum; ++m) {
        if (zero_) zero_->begin_backward(m == config_.grad_accum - 1);
        else ddp_->begin_backward(m == config_.grad_accum - 1);
        model_->forward(model_input(micro[m]), true);
        const float loss = model_->loss(model_target(micro[m]), 1.0f / float(config_.grad_accum));
        model_->backward();
        loss_sum += double(loss) * double(micro[m].n);
        samples += double(micro[m].n);
      }
      const float lr = schedule_->lr(step_);
      if (zero_) {
        zero_->end_backward();
        if (config_.clip_norm > 0) zero_->clip_grad_norm(config_.clip_norm);
        zero_->step(lr);  // own shard, then allgather of the parameters
      } else {
        ddp_->end_backward();
        if (config_.clip_norm > 0) clip_grad_norm(model_->flat_grads(), config_.clip_norm);
        if (master_) master_->step(*optimizer_, model_->flat_params(), model_->flat_grads(), lr);
        else optimizer_->step(model_->flat_params(), model_->flat_grads(), lr);
      }
      const CommStats& cs = zero_ ? zero_->last_stats() : ddp_->last_stats();
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
        if (on_log) on_log(l);
      }
      if (!config_.checkpoint_dir.empty() && config_.save_every > 0 && step_ % config_.save_every == 0)
        save_checkpoint(step_, epoch, consumed);
      if (config_.eval_every > 0 && step_ % config_.eval_every == 0 && on_eval) on_eval(step_, evaluate());
      if (config_.exit_after_step > 0 && step_ == config_.exit_after_step)
        throw SimulatedCrash(step_);  // the tool turns this into an abrupt death
    }
    if (config_.eval_every == 0 && !done) {
      sum.eval = evaluate();
      evaluated_at_end = true;
      if (on_eval) on_eval(step_, sum.eval);
    } else {
      evaluated_at_end = false;
    }
  }
  if (zero_) zero_->settle();
  if (!evaluated_at_end) {
    sum.eval = evaluate();
    if (on_eval) on_eval(step_, sum.eval);
  }
  if (!config_.checkpoint_dir.empty()) {
    full_precision_parameters();
    if (comm_->rank() == 0) {
      fs::create_directories(config_.checkpoint_dir);
      save_model(final_model_path(), *model_, {{"step", std::to_string(step_)}});
    }
    working_parameters();
    comm_->barrier();
  }
  sum.steps = step_;
  sum.time_s = since(t_start);
  sum.samples_per_s = double(samples_done) * n / std::max(train_time, 1e-9);
  sum.step_s = steps_run > 0 ? train_time / double(steps_run) : 0;
  sum.comm_bytes_per_step = steps_run > 0 ? double(comm_bytes) / double(steps_run) : 0;
  return sum;
}

ModelStateBytes DistTrainer::memory_bytes() {
  ModelStateBytes m;
  m.stage = config_.zero_stage;
  m.world = comm_->size();
  m.numel = model_->num_params();
  m.params = m.params_allocated = model_->store().param_bytes();
  m.grads = m.grads_allocated = model_->store().grad_bytes();
  size_t state = 0;
  for (auto& [name, span] : optimizer_->state_buffers()) state += span.size_bytes();
  // Mixed precision: the fp32 master belongs to the optimizer state (the ZeRO paper's
  // K = 12 for mixed-precision Adam).
  m.master = zero_ ? zero_->master_bytes() : master_ ? master_->bytes() : 0;
  state += m.master;
  m.optimizer = state;
  m.state_per_param = double(state) / double(std::max<size_t>(1, optimizer_->numel()));
  if (zero_) {
    m.comm = zero_->comm_buffer_bytes();
    if (zero_->stage() == 3) {
      // Only the own shard is resident between layers: count pages, not allocation.
      auto p = model_->store().padded_params(model_->num_params() + ParamStore::kShardSlack);
      m.params = resident_bytes(p.data(), p.size_bytes());
      m.params_allocated = p.size_bytes();
      m.gathered_peak = zero_->peak_gathered_bytes();
    }
    if (zero_->stage() >= 2) {
      // The flat buffer's pages are released between buckets: count what is resident.
      auto g = model_->store().padded_grads(model_->num_params() + ParamStore::kShardSlack);
      m.grads = zero_->grad_shard_bytes() + resident_bytes(g.data(), g.size_bytes());
      m.grads_allocated = zero_->grad_shard_bytes() + g.size_bytes();
    }
  } else {
    m.comm = ddp_->comm_buffer_bytes();
  }
  return m;
}

}  // namespace dpt
