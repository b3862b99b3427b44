#pragma once
// The one bucket scheduler behind every data-parallel strategy's gradient sync (DDP's
// allreduce, ZeRO-2/3's reduce to the owners): readiness counting, in-order launch and
// the comm/exposed timing. What a bucket's collectives are is the caller's business
// (BucketOps); when they run is decided here, identically on every rank.
//
// Terms:
//   bucket    a contiguous slice [begin, end) of the flat gradient buffer holding whole
//             parameters, cut by plan_buckets (bucket_plan.h): REVERSE parameter order
//             (the order backward finalizes gradients), a small first bucket.
//   ready     every parameter of the bucket reported on_grad_ready in this backward.
//   launch    BucketOps::launch issues the bucket's collectives. Buckets launch strictly
//             in bucket order on every rank (collectives must be issued in the same
//             order everywhere): with overlap, each ready bucket at the moment its
//             turn comes during backward; without, all of them after backward.
//   complete  BucketOps::complete runs on the compute thread once the bucket's works
//             finished (unpack a 16-bit wire, download, release pages). With
//             complete_early, finished buckets are completed in launch order during
//             backward already (ZeRO-2 frees memory as it goes); otherwise all at the
//             end of backward.
//   no_sync   a gradient-accumulation micro-step (begin_backward(false)): gradients
//             add up locally, nothing is launched.
//   comm time sum over buckets of done - max(launched, previous bucket's done): the
//             time the communicator spent on them, queueing behind an earlier bucket
//             not counted twice. `done` is when the last work of the bucket finished
//             (PromiseWork::on_finish), or the end of the wait for backends without it.
//   exposed   the part of comm time after backward's compute ended, i.e. what the step
//             waited for at end_backward: communication not hidden by compute.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/communicator.h"
#include "models/nn/module.h"
#include "parallel/bucket_plan.h"
#include "parallel/comm_stats.h"

namespace dpt {

struct BucketOps {
  // Optional: runs before the bucket's launch is timed (DDP on CUDA waits there for
  // the kernels that produce the gradients: not communication time).
  std::function<void(size_t index)> before_launch;
  // Issues the collectives of bucket `index` (range `b`), appending their works;
  // returns the bytes handed to the communicator.
  std::function<int64_t(size_t index, const BucketRange& b, std::vector<WorkPtr>& works)> launch;
  // The bucket's works are done (may be empty).
  std::function<void(size_t index, const BucketRange& b)> complete;
};

class BucketScheduler {
 public:
  BucketScheduler(Module& model, size_t first_bucket_bytes, size_t bucket_bytes, bool overlap, bool complete_early,
                  BucketOps ops);
  ~BucketScheduler();
  BucketScheduler(const BucketScheduler&) = delete;
  BucketScheduler& operator=(const BucketScheduler&) = delete;

  void begin_backward(bool sync);
  // Launches what is left, waits (each wait bounded by `timeout`), completes every
  // bucket; returns this backward's stats (all zero after a no_sync micro-step).
  CommStats end_backward(Millis timeout);
  // Whether any bucket's collectives may still be running (a backend switch must not
  // happen then).
  bool in_flight() const;

  const std::vector<BucketRange>& buckets() const { return ranges_; }
  size_t num_buckets() const { return ranges_.size(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct State {
    size_t pending = 0;
    std::vector<WorkPtr> works;
    int64_t bytes = 0;
    bool completed = false;
    Clock::time_point launched, done;
  };
  void on_grad_ready(const ParamInfo& p);
  void launch(size_t i);
  // Completes launched buckets in order; with wait=false stops at the first unfinished.
  void complete_finished(bool wait, Millis timeout);

  Module& model_;
  bool overlap_, complete_early_;
  BucketOps ops_;
  std::vector<BucketRange> ranges_;
  std::vector<size_t> bucket_of_param_;
  std::vector<State> state_;
  bool sync_ = true;
  size_t next_launch_ = 0, next_complete_ = 0;
};

}  // namespace dpt
