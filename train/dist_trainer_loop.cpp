// DistTrainer::run and its steps: epochs of agreed steps, what runs every K steps, the
// model saved at the end and the summary. run() reads as the table of contents; the
// order of every collective here is part of the contract (each rank issues the same
// ones in the same order), so each step keeps the order it had inline.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/dispatch/flight_recorder.h"
#include "comm/error.h"
#include "data/loading/loader.h"
#include "data/loading/sampler.h"
#include "models/io/checkpoint.h"
#include "train/dist_trainer.h"
#include "train/stop_signals.h"

namespace dpt {
namespace fs = std::filesystem;

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

// Test hook (--sample-log): which samples each completed step used, in the loader's order.
// A step this rank failed after its gradient went out (begin() without record()) is
// still its step if the group goes on from it: another survivor completed the step with
// every rank's gradient in it, so adopted() logs this rank's share too.
struct DistTrainer::SampleLog {
  SampleLog(const std::string& path, const DistributedSampler& sampler) {
    if (path.empty()) return;
    out.open(path, std::ios::app);
    indices = sampler.indices();
  }
  void begin(int64_t step, int world, int rank, size_t samples) { pending = {step, world, rank, samples}; }
  void record(int64_t step, int world, int rank, size_t samples) {
    pending.step = -1;
    if (!out.is_open()) return;
    out << step << " " << world << " " << rank;
    for (size_t i = 0; i < samples; ++i) out << " " << indices[used + i];
    out << "\n" << std::flush;
    used += samples;
  }
  // After a re-form: the group's state is at group_step.
  void adopted(int64_t group_step) {
    if (pending.step >= 0 && pending.step <= group_step) record(pending.step, pending.world, pending.rank, pending.samples);
    pending.step = -1;
  }
  struct Share {
    int64_t step = -1;
    int world = 0, rank = 0;
    size_t samples = 0;
  };
  std::ofstream out;
  std::vector<size_t> indices;
  size_t used = 0;
  Share pending;
};

TrainSummary DistTrainer::run(const TrainCallbacks& cb) {
  Totals t;
  const auto t_start = Clock::now();
  std::vector<Batch> micro(size_t(config_.grad_accum));
  // A process joining a running elastic job takes the members' state first. Should a
  // member fail meanwhile, the group re-forms and the joiner, still holding nothing,
  // arrives in the next generation with it instead of exiting (a launcher restart spent).
  if (config_.elastic_join) {
    holds_state_ = false;
    try {
      sync_state(false, cb);
      holds_state_ = true;
    } catch (const CommError& e) {
      if (dynamic_cast<const UsageError*>(&e) || dynamic_cast<const MismatchError*>(&e)) throw;
      reform(std::string("taking the group's state: ") + e.what(), false, cb, t);
    }
  } else {
    elastic_snapshot();  // elastic ZeRO: the start is the first snapshot
  }
  bool done = last_step_reached();
  bool evaluated_at_end = false;
  int64_t first_step = step_ + 1;
  while (epoch_ < config_.epochs && !done) {
    const EpochEnd end = train_epoch(micro, first_step, t, cb);
    if (end == EpochEnd::stopped) {  // a signal: the checkpoint is written; no evaluation, no final model
      t.sum.stopped = true;
      return summarize(t, t_start);
    }
    if (end == EpochEnd::reformed) {  // the data again from (epoch_, position_), on the new group
      first_step = step_ + 1;
      continue;
    }
    done = end == EpochEnd::last_step;
    evaluated_at_end = config_.eval_every == 0 && !done;
    if (evaluated_at_end)
      outside_steps([&] {
        set_flight_phase("eval");
        if (cb.on_phase) cb.on_phase(step_, "eval");  // test hook: R:S:eval, after step S
        evaluate_and_report(t.sum, cb);
      }, cb, t);
    if (!done) {
      ++epoch_;
      position_ = 0;
    }
  }
  outside_steps([&] {
    strategy_->settle();
    if (!evaluated_at_end) evaluate_and_report(t.sum, cb);
    save_final_model();
  }, cb, t);
  if (elastic_) elastic_->rendezvous->mark_done();
  return summarize(t, t_start);
}

void DistTrainer::outside_steps(const std::function<void()>& work, const TrainCallbacks& cb, Totals& t) {
  for (;;) {
    try {
      return work();
    } catch (const CommError& e) {
      if (!elastic_ || dynamic_cast<const UsageError*>(&e) || dynamic_cast<const MismatchError*>(&e)) throw;
      reform(e.what(), false, cb, t);  // every member had finished the steps before it: none is redone
    }
  }
}

bool DistTrainer::last_step_reached() const { return config_.steps > 0 && step_ >= config_.steps; }

void DistTrainer::evaluate_and_report(TrainSummary& sum, const TrainCallbacks& cb) {
  sum.eval = evaluate();
  if (cb.on_eval) cb.on_eval(step_, sum.eval);
}

DistTrainer::EpochEnd DistTrainer::train_epoch(std::vector<Batch>& micro, int64_t first_step, Totals& t,
                                               const TrainCallbacks& cb) {
  // The data from (epoch_, position_) for this world: the whole epoch, the rest of
  // one after a resume, or what is left of it after a membership change.
  const int n = comm_->size(), r = comm_->rank();
  DistributedSampler sampler(train_->size(), n, r, config_.shuffle, config_.seed, false);
  sampler.set_start(std::min(position_, train_->size()));
  DataLoader loader(*train_, sampler, config_.batch_size, false, 2);
  loader.reset(uint64_t(epoch_));
  SampleLog sample_log(config_.sample_log, sampler);
  int64_t consumed = int64_t(position_ / (config_.batch_size * size_t(n)));  // this rank's batches of the epoch
  // The pass's batches: the same count on every rank (the sampler deals each as many
  // samples), so every rank knows alike where the data may end.
  const int64_t pass_batches = int64_t(loader.num_batches());
  int64_t pass_taken = 0;
  cadence_.restart();
  for (;;) {
    if (last_step_reached()) return EpochEnd::last_step;
    if (step_ == switch_at_ && make_switch_) switch_communicator(cb);
    try {
      set_flight_step(step_ + 1);
      set_flight_phase("data");  // the batch and, when due, the world's agreement
      int fetched = 0;
      const bool starved = r == config_.uneven_rank && consumed >= config_.uneven_batches;
      if (!starved)
        for (auto& b : micro) fetched += loader.next(b) ? 1 : 0;
      const bool must_agree = strategy_->world_must_agree_after(step_) || config_.uneven_rank >= 0 ||
                              pass_taken + config_.grad_accum > pass_batches;
      pass_taken += fetched;
      const StepAgreement agreed = cadence_.due(step_, must_agree) ? agree_on_step(fetched == config_.grad_accum)
                                                                   : StepAgreement::step;
      if (!straggler_line_.empty() && cb.on_event) cb.on_event(straggler_line_);
      straggler_line_.clear();
      if (agreed == StepAgreement::stop) {
        // Every rank saw it in the same agreement: the boundary after step_ is everyone's.
        if (last_saved_step_ != step_) save_checkpoint(step_, epoch_, consumed, &cb);
        return EpochEnd::stopped;
      }
      // A straggler evicted (--straggler-action evict) leaves here; the others re-form
      // (newcomers waiting come in with them) and go on from this step boundary.
      if (agreed != StepAgreement::out_of_data)
        if (const int leaving = straggler_to_evict(cb); leaving >= 0) {
          evict_straggler(leaving, cb, t);
          return EpochEnd::reformed;
        }
      if (agreed == StepAgreement::newcomers_wait) {
        reform("newcomers are waiting to join", true, cb, t);
        return EpochEnd::reformed;
      }
      if (agreed == StepAgreement::out_of_data) {
        // Uneven inputs: some rank is out of data; everyone ends the epoch here.
        Batch b;
        int64_t left = fetched;
        while (!starved && loader.next(b)) ++left;
        t.sum.skipped_batches += left;
        return EpochEnd::data_end;
      }
      if (fetched != config_.grad_accum)  // a step without the agreement: the data cannot have ended
        throw std::logic_error("rank " + std::to_string(r) + " found its data ended after step " + std::to_string(step_) +
                               " where every rank had " + std::to_string(pass_batches - pass_taken + fetched) +
                               " batches left");
      consumed += config_.grad_accum;
      run_step(micro, first_step, consumed, sample_log, t, cb);
    } catch (const CommError& e) {
      // A dead or hung peer. Elastic: the survivors re-form and go on; otherwise the
      // run ends with the error (a usage error or a mismatch is never a failure to ride out).
      if (!elastic_ || dynamic_cast<const UsageError*>(&e) || dynamic_cast<const MismatchError*>(&e)) throw;
      reform(e.what(), false, cb, t);
      sample_log.adopted(step_);
      return EpochEnd::reformed;
    }
    if (config_.exit_after_step > 0 && step_ == config_.exit_after_step)
      throw SimulatedCrash(step_);  // the tool turns this into an abrupt death
  }
}

DistTrainer::StepAgreement DistTrainer::agree_on_step(bool have_batches) {
  // One small allreduce agrees that every rank has a batch (uneven inputs), in an
  // elastic job whether newcomers wait to join (rank 0 asks the store), and whether any
  // rank was asked to stop by a signal (train/stop_signals.h).
  // Newcomers are admitted where the strategy can take them (DiLoCo: a round's end).
  // The fourth: the steps until the next agreement (train/agreement_cadence.h), the
  // minimum of every rank's proposal.
  const bool admit = comm_->rank() == 0 && strategy_->accepts_members_now(step_) && joiners_waiting();
  // The last two: the straggler watch's slowest and fastest compute (straggler_watch.h).
  int32_t agree[4 + StragglerWatch::kSlots] = {have_batches ? 1 : 0, -int32_t(admit),
                                               -int32_t(config_.stop_on_signal && stop_signal() != 0),
                                               cadence_.propose(step_)};
  straggler_.fill(agree + 4, comm_->rank(), comm_->size());
  comm_->allreduce(make_buffer(agree, 4 + StragglerWatch::kSlots), ReduceOp::min);
  cadence_.agreed(step_, agree[3]);
  straggler_line_ = straggler_.read(agree + 4, step_);
  if (agree[2] < 0) return StepAgreement::stop;
  if (agree[1] < 0) return StepAgreement::newcomers_wait;
  return agree[0] ? StepAgreement::step : StepAgreement::out_of_data;
}

void DistTrainer::run_step(std::vector<Batch>& micro, int64_t first_step, int64_t consumed, SampleLog& sample_log,
                           Totals& t, const TrainCallbacks& cb) {
  // ---- one step: micro-steps of forward/backward, gradient sync, update ----
  const int n = comm_->size();
  const float lr = schedule_->lr(step_);
  size_t samples = 0;
  for (const Batch& b : micro) samples += size_t(b.n);
  sample_log.begin(step_ + 1, n, comm_->rank(), samples);
  const StepLoss step_loss = train_step(micro, t, lr, cb);
  const size_t begin = position_;
  position_ += size_t(step_loss.samples) * size_t(n);  // every rank consumed as many
  sample_log.record(step_, n, comm_->rank(), size_t(step_loss.samples));
  log_step(step_loss, lr, begin, first_step, t, cb);
  run_scheduled_work(consumed, cb);
}

void DistTrainer::log_step(const StepLoss& step_loss, float lr, size_t begin, int64_t first_step, Totals& t,
                           const TrainCallbacks& cb) {
  // The first step this group runs is logged too; the decision must be the same on
  // every rank (a newcomer's own count of steps would differ from the members').
  const bool log_now = config_.log_every > 0 && (step_ % config_.log_every == 0 || step_ == first_step);
  if (!log_now) return;
  const int n = comm_->size();
  const CommStats& cs = strategy_->last_stats();
  double ls[2] = {step_loss.sum, step_loss.weight};  // mean over all ranks' samples (or target tokens)
  comm_->allreduce(Buffer{ls, 2, DType::f64, {}}, ReduceOp::sum);
  StepLog l{step_,    epoch_,   ls[0] / ls[1], lr, double(t.samples_done) * n / std::max(t.train_time, 1e-9),
            cs.comm_s, cs.exposed_s, cs.bytes, n,  begin,         position_,
            scaler_ ? scaler_->scale() : 0.0f, scaler_ ? scaler_->state().skipped_steps : 0,
            comm_->traffic().other_hosts_bytes()};
  t.sum.last_loss = l.loss;
  if (cb.on_log) cb.on_log(l);
}

void DistTrainer::run_scheduled_work(int64_t consumed, const TrainCallbacks& cb) {
  if (!config_.checkpoint_dir.empty() && config_.save_every > 0 && step_ % config_.save_every == 0)
    save_checkpoint(step_, epoch_, consumed, &cb);
  if (config_.eval_every > 0 && step_ % config_.eval_every == 0 && cb.on_eval) cb.on_eval(step_, evaluate());
  const int64_t every = strategy_->elastic_snapshot_period(config_.elastic_snapshot_every);
  if (elastic_ && every > 0 && step_ % every == 0) elastic_snapshot();
}

void DistTrainer::save_final_model() {
  if (config_.checkpoint_dir.empty() && config_.state_dump.empty()) return;
  // Rank 0 writes the model; the test hook's dumps need every rank's.
  if (config_.state_dump.empty()) strategy_->expose_full_parameters_on(0);
  else strategy_->expose_full_parameters();
  if (comm_->rank() == 0 && !config_.checkpoint_dir.empty()) {
    fs::create_directories(config_.checkpoint_dir);
    write_model_file(config_.checkpoint_dir, {{"step", std::to_string(step_)}});
  }
  if (!config_.state_dump.empty())  // test hook: each rank's own state, to compare across ranks
    save_model(config_.state_dump + ".rank" + std::to_string(comm_->rank()) + ".safetensors", *model_,
               {{"step", std::to_string(step_)}});
  strategy_->restore_working_parameters();
  comm_->barrier();
}

TrainSummary DistTrainer::summarize(Totals& t, std::chrono::steady_clock::time_point start) {
  TrainSummary& sum = t.sum;
  const int n = comm_->size();
  sum.backend = comm_->backend_name();
  sum.world_size = n;
  sum.steps = step_;
  sum.agreements = cadence_.count();
  if (const auto& s = straggler_.current()) {
    sum.straggler_rank = s->rank;
    sum.straggler_ratio = s->ratio;
  }
  if (t.grads_seen > 0) {  // over all ranks' owned gradients
    double z[2] = {t.zero_grads, t.grads_seen};
    comm_->allreduce(Buffer{z, 2, DType::f64, {}}, ReduceOp::sum);
    sum.zero_grad_frac = z[0] / z[1];
  }
  if (scaler_) {
    sum.loss_scale = scaler_->scale();
    sum.skipped_steps = scaler_->state().skipped_steps;
  }
  for (const Retired& r : retired_) {
    BackendTraffic b = r.at_retirement;
    if (r.live) b.carried = r.live->traffic();
    sum.traffic.push_back(b);
  }
  sum.traffic.push_back({comm_->backend_name(), comm_->traffic(), false});
  sum.time_s = since(start);
  sum.samples_per_s = double(t.samples_done) * n / std::max(t.train_time, 1e-9);
  sum.step_s = t.steps_run > 0 ? t.train_time / double(t.steps_run) : 0;
  sum.comm_bytes_per_step = t.steps_run > 0 ? double(t.comm_bytes) / double(t.steps_run) : 0;
  if (t.steps_run > 0) sum.pcie_per_step = {t.pcie.to_host / uint64_t(t.steps_run), t.pcie.to_device / uint64_t(t.steps_run)};
  return sum;
}

}  // namespace dpt
