#pragma once
// DDP's gradient synchronization: every bucket of the flat gradient buffer is averaged
// over the ranks with one allreduce, launched as the bucket fills during backward
// (bucket_scheduler.h decides when). DDP (stage 0) and ZeRO-1 use it.
//
// Terms:
//   bucket        a contiguous slice of the flat gradient buffer (bucket_plan.h); an f32
//                 bucket is allreduced (avg) in place, with no copy.
//   wire dtype    f32, or bf16/f16 (--grad-compress, --precision bf16): the bucket is
//                 divided by the world size, rounded into a 16-bit copy (wire16.h),
//                 summed on the wire, and widened back when it completes.
//   device bucket a model on CUDA whose communicator takes device buffers itself (NCCL,
//                 a CUDA-aware MPI): the bucket is reduced where the gradients are and
//                 only the averaged values come down to the host buffer the optimizer
//                 reads. On a staged backend (tcp, Debian's Open MPI) each gradient is
//                 instead downloaded once when final and reduced on the host: staging
//                 a device bucket would cross PCIe three times (down, up, down again).
//   PowerSGD      --grad-compress powersgd (powersgd.h), from optimizer step
//                 start_step on: the launch sends the bucket's P matrices and
//                 uncompressed elements in one allreduce (avg); the completion
//                 orthonormalises P, averages Q with a second allreduce and rebuilds the
//                 gradients. Earlier steps are plain f32 allreduces. Host buckets only.
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "models/nn/module.h"
#include "parallel/bucket_scheduler.h"
#include "parallel/ddp/powersgd.h"
#include "parallel/strategy_config.h"

namespace dpt {


class GradAllreduce {
 public:
  GradAllreduce(Module& model, Communicator& comm, const DdpConfig& config);
  ~GradAllreduce();

  // Only between steps, with nothing in flight. Re-decides device buckets.
  void set_communicator(Communicator& comm);
  // steps_done: optimizer steps taken so far (decides whether PowerSGD compresses).
  void begin_backward(bool sync, int64_t steps_done = 0);
  // Gradients are then the average over ranks (PowerSGD: its approximation), in the host buffer.
  CommStats end_backward();
  size_t num_buckets() const { return scheduler_.num_buckets(); }
  // Bytes of the 16-bit wire copies (compression only: f32 buckets reduce in place).
  // PowerSGD: also its P, Q and error buffers.
  size_t comm_buffer_bytes() const;
  bool device_buckets() const { return device_buckets_; }
  // PowerSGD's per-bucket state (empty when it is off), for checkpoints.
  const std::vector<std::unique_ptr<PowerSgdBucket>>& powersgd_buckets() const { return powersgd_; }
  std::vector<std::unique_ptr<PowerSgdBucket>>& powersgd_buckets() { return powersgd_; }

 private:
  int64_t launch(const BucketRange& b, std::vector<WorkPtr>& works, std::vector<uint16_t>& wire);
  void complete(const BucketRange& b, std::vector<uint16_t>& wire);
  void choose_device_buckets();
  // PowerSGD's second half of bucket i: orthonormalise, average Q, rebuild.
  void complete_powersgd(size_t i);

  Module& model_;
  Communicator* comm_;
  DdpConfig config_;
  std::vector<std::vector<uint16_t>> wire_;  // per bucket, 16-bit wire only
  bool device_buckets_ = false;
  BucketScheduler scheduler_;
  std::vector<std::unique_ptr<PowerSgdBucket>> powersgd_;  // per bucket, when on
  bool compress_now_ = false;                               // this backward runs PowerSGD
  CommStats q_stats_;                                       // Q's allreduces this backward
};

}  // namespace dpt
