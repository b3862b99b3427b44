// DistTrainer's elastic re-forming (train --elastic, docs/elastic.md).
//
// Terms:
//   failure     a CommError from the group's communicator (a peer's socket closed, a
//               wait timed out on a hung or unreachable peer) anywhere in a step.
//   reform      this process abandons the communicator (aborting it, so peers blocked on
//               it fail at once), arrives in the next generation through the store
//               (comm/store/elastic_membership.h), builds its communicator, replaces the
//               strategy by a fresh one over it and takes the group's state. A planned
//               reform (newcomers waiting) runs the same way at a step boundary.
//   source      the member with the most completed steps (lowest rank on a tie). Under
//               DDP every survivor holds the whole state, and one that finished the
//               failed step holds it after that step: it counted every rank's gradients,
//               so nothing is lost and nobody redoes it; if none finished it, the step
//               is redone by the survivors on the samples not yet consumed.
//   lost steps  completed steps the group gives up: the source's step is the newest any
//               survivor completed, so 0 under DDP.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "comm/dispatch/flight_recorder.h"
#include "optim/optimizer.h"
#include "train/dist_trainer.h"
#include "train/make_strategy.h"

namespace dpt {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

void DistTrainer::enable_elastic(ElasticContext context) {
  if (!context.rendezvous || !context.make_comm) throw std::invalid_argument("enable_elastic: rendezvous and make_comm are required");
  elastic_ = std::make_unique<ElasticContext>(std::move(context));
}

bool DistTrainer::joiners_waiting() {
  if (!elastic_) return false;
  const auto now = Clock::now();
  if (now - last_join_check_ < elastic_->join_check) return false;
  last_join_check_ = now;
  const int next = elastic_->membership.generation + 1;
  return elastic_->rendezvous->arrivals_waiting(next) && comm_->size() < elastic_->rendezvous->limits().max;
}

bool DistTrainer::job_done() {
  try {
    return elastic_->rendezvous->done();
  } catch (const std::exception&) {
    return false;  // the store is gone too: say why this process stopped, as before
  }
}

void DistTrainer::elastic_snapshot() {
  if (elastic_) strategy_->elastic_snapshot({step_, epoch_, position_}, elastic_->membership.generation, config_.elastic_snapshot_replicas);
}

DistTrainer::StateSync DistTrainer::sync_state(bool have_state, const TrainCallbacks& cb) {
  GroupChange change;
  if (have_state) change.mine = {step_, epoch_, position_};
  // Test hook (--debug-signal R:S:adopt): a member dying while the group takes its state.
  if (have_state && cb.on_phase) cb.on_phase(step_ + 1, "adopt");
  // The newest step any survivor completed, for the lost-steps count.
  int64_t newest = have_state ? step_ : -1;
  comm_->allreduce(make_buffer(&newest, 1), ReduceOp::max);
  ElasticProgress at;
  try {
    at = strategy_->adopt_group_state(change);
  } catch (const ElasticError& e) {
    // Every member failed alike (the same lost ranks): the last checkpoint on disk, if any.
    const std::string latest = config_.checkpoint_dir.empty() ? "" : config_.checkpoint_dir + "/latest";
    if (latest.empty() || !load_latest_checkpoint())
      throw ElasticError(std::string(e.what()) + ", and there is no checkpoint to fall back to (--checkpoint-dir)");
    strategy_->broadcast_parameters();
    if (cb.on_event) {
      std::string why = e.what();  // ElasticError's texts mostly start with the prefix already
      if (why.rfind("elastic: ", 0) != 0) why = "elastic: " + why;
      cb.on_event(why + ": falling back to the checkpoint of step " + std::to_string(step_));
    }
    elastic_snapshot();
    return {newest - step_, true};
  }
  step_ = at.step;
  epoch_ = at.epoch;
  position_ = at.position;
  elastic_snapshot();  // the old world's snapshots are no use in this one
  return {newest - step_, false};
}

int DistTrainer::straggler_to_evict(const TrainCallbacks& cb) {
  const auto& s = straggler_.current();
  if (!config_.straggler_evict || !elastic_ || !s) return -1;
  // DiLoCo takes a membership change only at a round's end: the eviction waits for one.
  if (!strategy_->accepts_members_now(step_)) return -1;
  const int min = elastic_->rendezvous->limits().min;
  if (comm_->size() - 1 < min) {
    if (!eviction_refusal_said_ && cb.on_event)
      cb.on_event("straggler: rank " + std::to_string(s->rank) + " stays: evicting it would leave " +
                  std::to_string(comm_->size() - 1) + " rank(s), fewer than the " + std::to_string(min) +
                  " launch --elastic -n MIN:MAX allows");
    eviction_refusal_said_ = true;
    return -1;
  }
  return s->rank;
}

void DistTrainer::evict_straggler(int rank, const TrainCallbacks& cb, Totals& t) {
  const StragglerWatch::Straggler s = *straggler_.current();
  const std::string id = elastic_->membership.ids.at(size_t(rank));
  char what[256];
  std::snprintf(what, sizeof what, "rank %d (%s), which computed %.2fx the fastest rank's time per step since step %lld",
                rank, id.c_str(), s.ratio, static_cast<long long>(s.since_step));
  const std::string why = std::string("straggler: evicting ") + what;
  if (cb.on_event) cb.on_event(why);
  t.sum.evicted.push_back(id);
  if (comm_->rank() == rank) {
    // The group's snapshot of this step (ZeRO: this rank's shard, copied to its
    // neighbours) is taken with it, as a planned re-forming takes it; then it goes.
    elastic_snapshot();
    elastic_->rendezvous->leave("evicted as a straggler");
    throw ElasticEvicted("elastic: " + id + " leaves the job, evicted as a straggler: " + what);
  }
  reform(why, true, cb, t);
}

void DistTrainer::reform(const std::string& why, bool planned, const TrainCallbacks& cb, Totals& t) {
  const auto t0 = Clock::now();
  set_flight_phase("reform");
  if (cb.on_leave) cb.on_leave(elastic_->membership.generation, why);
  // Peers blocked on us fail at once instead of waiting out their timeout. A planned
  // change keeps the group's current state: a snapshot of it first, on the old group.
  if (!planned) comm_->abort("elastic: leaving generation " + std::to_string(elastic_->membership.generation) + ": " + why);
  else elastic_snapshot();
  // The state leaves the old strategy, which must be gone (it hooks the model) before
  // the next one is made.
  const CarriedStatePtr carried = strategy_->carry_out();
  strategy_.reset();
  // The parameters too: an attempt that fails halfway through the state broadcast
  // must not leave the next one with half of them overwritten.
  const auto params = model_->flat_params();
  const std::vector<float> kept(params.begin(), params.end());
  Membership m = elastic_->membership;
  // Who trained in the group being left: the event's lost and joined count against it,
  // not against a generation that formed and failed again before training.
  const std::vector<std::string> trained = m.ids;
  for (;;) {
    const int prev_rank = m.rank;
    m = elastic_->rendezvous->form(m.generation + 1, prev_rank);
    if (m.excluded()) {
      const std::string what = "excluded from generation " + std::to_string(m.generation) +
                               ": the group re-formed without this process (" + elastic_->rendezvous->id() +
                               "), which it presumed lost";
      if (job_done()) throw ElasticFinishedWithout("elastic: the job finished without this process (" + what + ")");
      throw ElasticError("elastic: " + what);
    }
    try {
      std::copy(kept.begin(), kept.end(), params.begin());
      std::unique_ptr<Communicator> next = elastic_->make_comm(m);
      strategy_ = make_strategy(config_.parallel, *model_, *next, [this](size_t numel) {
        return make_optimizer(config_.optimizer, config_.optimizer_config, numel);
      });
      strategy_->carry_in(carried);
      comm_ = next.get();
      if (sync_bn_) sync_bn_->set_communicator(strategy_->gradient_group());
      owned_comm_ = std::move(next);  // the failed one (if it was ours) goes
      elastic_->membership = m;
      const StateSync sync = sync_state(holds_state_, cb);
      holds_state_ = true;
      const int64_t lost = sync.lost_steps;
      MembershipChange c;
      c.generation = m.generation;
      c.world_size = m.size();
      for (const auto& id : trained)
        if (std::find(m.ids.begin(), m.ids.end(), id) == m.ids.end()) c.lost.push_back(id);
      for (const auto& id : m.ids) c.joined += std::find(trained.begin(), trained.end(), id) == trained.end();
      c.resumed_after_step = step_;
      c.lost_steps = lost;
      c.prev_members = trained;
      c.from_checkpoint = sync.from_checkpoint;
      c.recovery_s = std::chrono::duration<double>(Clock::now() - t0).count();
      c.reason = why;
      straggler_.reset_streaks();  // new ranks; a newcomer's watch is empty: all start alike
      eviction_refusal_said_ = false;
      if (!planned) {
        ++t.sum.recoveries;
        t.sum.lost_steps += lost;
      }
      if (cb.on_membership) cb.on_membership(c);
      return;
    } catch (const CommError& e) {
      // Someone else failed while the group re-formed: the next generation, again.
      if (dynamic_cast<const UsageError*>(&e) || dynamic_cast<const MismatchError*>(&e)) throw;
      strategy_.reset();
      if (owned_comm_ && comm_ == owned_comm_.get()) owned_comm_->abort("elastic: re-forming again: " + std::string(e.what()));
    }
  }
}

}  // namespace dpt
