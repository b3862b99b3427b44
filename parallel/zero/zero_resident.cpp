// ZeRO-1 and -2 device-resident (--zero 1|2 --optimizer-device cuda, zero_strategy.h): the
// shard optimizer's state, the parameters and the gradients stay on the GPU. Stage 1
// allreduces the gradients as DDP's device-resident buckets are (grad_allreduce.h,
// nothing comes down); stage 2 reduces each bucket's pieces into the owner's device
// gradient shard (zero_grad_reducer.h). Each rank steps its shard of the device parameters
// with its device gradients, and the shards are allgathered in place on the device buffer. Host views
// (checkpoints, elastic snapshots) refresh from the device through ParamStore and
// Optimizer::state_buffers, as device-resident DDP's do.
#include <chrono>
#include <cmath>
#include <limits>

#include "device/runtime.h"
#include "optim/clip_grad.h"
#include "optim/cuda/device_steps.h"
#include "parallel/zero/zero_strategy.h"

namespace dpt {

float* ZeroStrategy::device_shard(float* flat) const { return flat + layout_.begin(comm_->rank()); }

float* ZeroStrategy::device_grads_to_step() {
  return stage_ == 1 ? device_shard(model_.store().device_flat_grads()) : device_grad_shard_.data();
}

void ZeroStrategy::step_on_device(float lr) {
  ParamStore& s = model_.store();
  s.sync_device_params();  // a host view handed out since the forward may have written
  float* mine = device_shard(s.device_flat_params());
  optimizer_->step_on_device(mine, device_grads_to_step(), lr);
  const auto t0 = std::chrono::steady_clock::now();
  // The communicator reads the shard outside the kernel stream (NCCL's stream, or the
  // staging copies of tcp and mpi): the step's kernels must be done first.
  device::wait_for_kernels();
  const Device d = device::current();
  comm_->allgather(Buffer{mine, layout_.shard, DType::f32, d},
                   Buffer{s.device_flat_params(), layout_.padded(), DType::f32, d});
  s.device_params_updated();
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.comm_s += dt;
  stats_.exposed_s += dt;
  stats_.bytes += int64_t(layout_.padded() * sizeof(float));
}

void ZeroStrategy::clip_grad_norm_on_device(float max_norm) {
  ParamStore& s = model_.store();
  float* g = device_grads_to_step();
  // Padding gradients are zero, so the shards' squares sum to the full buffer's.
  double sq = gpu::squared_norm(g, layout_.shard);
  comm_->allreduce(Buffer{&sq, 1, DType::f64, {}}, ReduceOp::sum);
  const float coef = clip_coefficient(max_norm, float(std::sqrt(sq)));
  if (coef != 1.0f) gpu::scale(g, layout_.shard, coef);
  s.device_grads_updated();
}

bool ZeroStrategy::unscale_owned_grads(float inv_scale) {
  if (!on_device_) return ParallelStrategy::unscale_owned_grads(inv_scale);
  ParamStore& s = model_.store();
  const bool found = gpu::scale_and_find_nonfinite(device_grads_to_step(), layout_.shard, inv_scale);
  s.device_grads_updated();
  return found;
}

void ZeroStrategy::poison_owned_grad() {
  if (!on_device_) return ParallelStrategy::poison_owned_grad();
  ParamStore& s = model_.store();
  if (layout_.shard == 0) return;
  const float inf = std::numeric_limits<float>::infinity();
  device::copy(device_grads_to_step(), &inf, sizeof inf);  // ordered after backward's kernels
  s.device_grads_updated();
}

}  // namespace dpt
