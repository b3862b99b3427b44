#include "optim/zero_grad_reducer.h"

#include <stdexcept>

#include "optim/bucket_plan.h"
#include "optim/wire16.h"
#include "optim/zero_pages.h"

namespace dpt {

ZeroGradReducer::ZeroGradReducer(Module& model, Communicator& comm, const ShardLayout& layout, const DdpConfig& config,
                                 std::span<float> grad_shard)
    : model_(model), comm_(&comm), layout_(layout), config_(config), grad_shard_(grad_shard) {
  if (config_.wire != DType::f32) check_wire16(config_.wire, "ZeRO-2 gradient reduction");
  if (grad_shard_.size() != layout_.shard) throw std::logic_error("ZeRO-2: gradient shard has the wrong size");
  // Buckets exactly as DDP cuts them (reverse order, small first bucket)...
  BucketPlan plan = plan_buckets(model.param_infos(), config_.first_bucket_bytes, config_.bucket_bytes);
  buckets_ = make_buckets<Bucket>(plan);
  bucket_of_param_ = std::move(plan.bucket_of_param);
  // ... then cut at shard boundaries: one piece per owner the bucket touches.
  for (auto& b : buckets_)
    for (size_t i = b.begin; i < b.end;) {
      const int owner = layout_.owner(i);
      const size_t e = std::min(b.end, layout_.end(owner));
      b.pieces.push_back({i, e, owner});
      i = e;
    }

  ModuleHooks hooks = model.hooks();
  hooks.on_grad_ready = [this](const ParamInfo& p) { on_grad_ready(p); };
  model.set_hooks(hooks);
}

ZeroGradReducer::~ZeroGradReducer() {
  ModuleHooks hooks = model_.hooks();
  hooks.on_grad_ready = nullptr;
  model_.set_hooks(hooks);
}

void ZeroGradReducer::set_communicator(Communicator& comm) {
  for (auto& b : buckets_)
    for (auto& w : b.works)
      if (w && !w->test()) throw std::logic_error("ZeRO-2: set_communicator while a reduce is still in flight");
  comm_ = &comm;
}

void ZeroGradReducer::begin_backward(bool sync) {
  sync_ = sync;
  next_launch_ = next_reap_ = 0;
  for (auto& b : buckets_) {
    b.pending = b.num_params;
    b.works.clear();
    b.reaped = false;
    b.done = Clock::time_point{};
  }
}

void ZeroGradReducer::on_grad_ready(const ParamInfo& p) {
  if (!sync_) return;
  Bucket& b = buckets_[bucket_of_param_[p.index]];
  if (b.pending == 0) throw std::logic_error("ZeRO-2: gradient of " + p.name + " reported ready twice");
  --b.pending;
  if (!config_.overlap) return;
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) launch(buckets_[next_launch_++]);
  reap_finished(false);
}

void ZeroGradReducer::launch(Bucket& b) {
  float* grads = model_.flat_grads().data();
  const int me = comm_->rank();
  b.launched = Clock::now();
  if (config_.wire != DType::f32) {
    // 16-bit: divide, round, sum on the wire (as DDP's compression); every rank
    // reduces in place in the bucket's 16-bit copy, the owner widens its pieces at reap.
    b.wire.resize(b.end - b.begin);
    pack16(config_.wire, grads + b.begin, b.wire.data(), b.wire.size(), 1.0f / float(comm_->size()));
    for (const Piece& pc : b.pieces) {
      Buffer buf{b.wire.data() + (pc.begin - b.begin), pc.end - pc.begin, config_.wire, {}};
      b.works.push_back(comm_->reduce_async(buf, buf, ReduceOp::sum, pc.owner));
    }
  } else {
    for (const Piece& pc : b.pieces) {
      Buffer send{grads + pc.begin, pc.end - pc.begin, DType::f32, {}};
      // The owner receives into its shard; the others pass their own slice (unused).
      Buffer recv = pc.owner == me ? Buffer{grad_shard_.data() + (pc.begin - layout_.begin(me)), pc.end - pc.begin,
                                            DType::f32, {}}
                                   : send;
      b.works.push_back(comm_->reduce_async(send, recv, ReduceOp::avg, pc.owner));
    }
  }
  if (!b.works.empty())
    if (auto pw = std::dynamic_pointer_cast<PromiseWork>(b.works.back())) {
      Bucket* bp = &b;
      pw->on_finish([bp] { bp->done = Clock::now(); });
    }
}

// Releases the flat-gradient slices of launched buckets whose reduces are done, in
// launch order (so a bucket is never released while an earlier one still reads it:
// buckets are disjoint, but in-order keeps the bookkeeping one index).
void ZeroGradReducer::reap_finished(bool wait) {
  float* grads = model_.flat_grads().data();
  while (next_reap_ < next_launch_) {
    Bucket& b = buckets_[next_reap_];
    for (auto& w : b.works) {
      if (wait) w->wait(comm_->timeout());
      else if (!w->test()) return;
    }
    if (config_.wire != DType::f32) {
      const int me = comm_->rank();
      for (const Piece& pc : b.pieces)
        if (pc.owner == me)
          unpack16(config_.wire, b.wire.data() + (pc.begin - b.begin), grad_shard_.data() + (pc.begin - layout_.begin(me)),
                   pc.end - pc.begin);
      std::vector<uint16_t>().swap(b.wire);  // only buckets in flight hold a 16-bit copy
    }
    release_slice(grads + b.begin, grads + b.end);
    b.reaped = true;
    ++next_reap_;
  }
}

void ZeroGradReducer::end_backward() {
  stats_ = CommStats{};
  if (!sync_) return;
  for (auto& b : buckets_)
    if (b.pending != 0) throw std::logic_error("ZeRO-2: backward ended with gradients not reported ready");
  const auto compute_end = Clock::now();
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
  reap_finished(true);
  const auto all_done = Clock::now();
  Clock::time_point prev_done{}, last_done{};
  for (auto& b : buckets_) {
    if (b.done == Clock::time_point{}) b.done = all_done;
    const auto start = std::max(b.launched, prev_done);
    stats_.comm_s += std::chrono::duration<double>(b.done - start).count();
    prev_done = b.done;
    last_done = std::max(last_done, b.done);
    stats_.bytes += int64_t((b.end - b.begin) * dtype_size(config_.wire));
  }
  stats_.exposed_s = std::max(0.0, std::chrono::duration<double>(last_done - compute_end).count());
  stats_.exposed_s = std::min(stats_.exposed_s, stats_.comm_s);
}

}  // namespace dpt
