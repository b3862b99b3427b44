#include "parallel/bucket_scheduler.h"

#include "comm/dispatch/flight_recorder.h"

#include <algorithm>
#include <stdexcept>

namespace dpt {

BucketScheduler::BucketScheduler(Module& model, size_t first_bucket_bytes, size_t bucket_bytes, bool overlap,
                                 bool complete_early, BucketOps ops)
    : model_(model), overlap_(overlap), complete_early_(complete_early), ops_(std::move(ops)) {
  if (!ops_.launch || !ops_.complete) throw std::logic_error("BucketScheduler: launch and complete are required");
  BucketPlan plan = plan_buckets(model.param_infos(), first_bucket_bytes, bucket_bytes);
  ranges_ = std::move(plan.buckets);
  bucket_of_param_ = std::move(plan.bucket_of_param);
  state_.resize(ranges_.size());
  ModuleHooks hooks = model.hooks();
  hooks.on_grad_ready = [this](const ParamInfo& p) { on_grad_ready(p); };
  model.set_hooks(hooks);
}

BucketScheduler::~BucketScheduler() {
  ModuleHooks hooks = model_.hooks();
  hooks.on_grad_ready = nullptr;
  model_.set_hooks(hooks);
}

bool BucketScheduler::in_flight() const {
  for (const auto& s : state_)
    for (const auto& w : s.works)
      if (w && !w->test()) return true;
  return false;
}

void BucketScheduler::begin_backward(bool sync) {
  sync_ = sync;
  next_launch_ = next_complete_ = 0;
  for (size_t i = 0; i < state_.size(); ++i) {
    State& s = state_[i];
    s.pending = ranges_[i].num_params;
    s.works.clear();
    s.bytes = 0;
    s.completed = false;
    s.done = Clock::time_point{};
  }
}

void BucketScheduler::on_grad_ready(const ParamInfo& p) {
  if (!sync_) return;
  State& s = state_[bucket_of_param_[p.index]];
  if (s.pending == 0) throw std::logic_error("bucket scheduler: gradient of " + p.name + " reported ready twice");
  --s.pending;
  if (!overlap_) return;
  // Every consecutive ready bucket, in order: all ranks issue the same sequence.
  while (next_launch_ < state_.size() && state_[next_launch_].pending == 0) launch(next_launch_++);
  if (complete_early_) complete_finished(false, Millis(0));
}

void BucketScheduler::launch(size_t i) {
  State& s = state_[i];
  if (ops_.before_launch) ops_.before_launch(i);
  s.launched = Clock::now();
  set_flight_bucket(int32_t(i));  // the flight recorder files the bucket's collectives under it
  s.bytes = ops_.launch(i, ranges_[i], s.works);
  set_flight_bucket(-1);
  // Collectives complete in issue order: the bucket is done when its last work is.
  if (!s.works.empty())
    if (auto pw = std::dynamic_pointer_cast<PromiseWork>(s.works.back())) {
      State* sp = &s;
      pw->on_finish([sp] { sp->done = Clock::now(); });
    }
}

void BucketScheduler::complete_finished(bool wait, Millis timeout) {
  while (next_complete_ < next_launch_) {
    State& s = state_[next_complete_];
    for (auto& w : s.works) {
      if (wait) w->wait(timeout);
      else if (!w->test()) return;
    }
    ops_.complete(next_complete_, ranges_[next_complete_]);
    s.completed = true;
    ++next_complete_;
  }
}

CommStats BucketScheduler::end_backward(Millis timeout) {
  CommStats stats;
  if (!sync_) return stats;
  for (const auto& s : state_)
    if (s.pending != 0) throw std::logic_error("bucket scheduler: backward ended with gradients not reported ready");
  const auto compute_end = Clock::now();
  while (next_launch_ < state_.size()) launch(next_launch_++);
  complete_finished(true, timeout);
  const auto all_done = Clock::now();
  Clock::time_point prev_done{}, last_done{};
  for (auto& s : state_) {
    if (s.done == Clock::time_point{}) s.done = all_done;  // a backend without completion times
    const auto start = std::max(s.launched, prev_done);
    stats.comm_s += std::chrono::duration<double>(s.done - start).count();
    prev_done = s.done;
    last_done = std::max(last_done, s.done);
    stats.bytes += s.bytes;
  }
  stats.exposed_s = std::max(0.0, std::chrono::duration<double>(last_done - compute_end).count());
  stats.exposed_s = std::min(stats.exposed_s, stats.comm_s);
  return stats;
}

}  // namespace dpt
