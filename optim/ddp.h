#pragma once
// DistributedDataParallel: keeps one model replica per rank in step.
//
// Terms:
//   bucket      a contiguous slice of the flat gradient buffer holding whole parameters.
//               Buckets are cut in REVERSE parameter order (the order backward finalizes
//               gradients), the first one small so communication starts early, the
//               rest up to bucket_bytes. A bucket is allreduced (average) in place.
//   ready       a bucket is ready when the model's on_grad_ready fired for each of its
//               parameters; with overlap it is launched at once (asynchronously) while
//               backward continues with earlier layers.
//   no_sync     a micro-step of gradient accumulation: gradients add up locally and
//               nothing is communicated (begin_backward(false)).
//   comm time   sum over buckets of the time the communicator spent on them.
//   exposed     the part of comm time after backward's compute ended, i.e. what the
//               step waited for in end_backward(): communication not hidden by compute.
//   wire dtype  f32, or bf16/f16 compression: gradients are divided by the world size,
//               rounded to 16 bits, summed on the wire, and widened back.
#include <chrono>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "models/module.h"

namespace dpt {

struct DdpConfig {
  size_t bucket_bytes = 25u << 20;
  size_t first_bucket_bytes = 1u << 20;
  bool overlap = true;
  DType wire = DType::f32;  // f32 (none), bf16 or f16
};

struct CommStats {
  double comm_s = 0;
  double exposed_s = 0;
  int64_t bytes = 0;
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(Module& model, Communicator& comm, DdpConfig config);
  ~DistributedDataParallel();

  // Broadcasts parameters from rank 0 and checks that every rank then holds identical
  // bytes (checksum); throws std::runtime_error naming the ranks that differ.
  void broadcast_parameters();
  // Hands the replica another communicator (the run-time backend switch). Only between
  // steps; the old one must have nothing in flight.
  void set_communicator(Communicator& comm);
  Communicator& communicator() { return *comm_; }

  // Call before the backward of each micro-step; sync=false accumulates without talking.
  void begin_backward(bool sync);
  // After backward: launches what is not launched yet, waits for all buckets and, with
  // compression, widens the result. Gradients are then the average over ranks.
  void end_backward();

  const CommStats& last_stats() const { return stats_; }
  size_t num_buckets() const { return buckets_.size(); }
  // Bytes of the 16-bit wire copies (compression only: f32 buckets reduce in place).
  size_t comm_buffer_bytes() const;
  // FNV-1a of the parameter bytes: equal on all ranks after broadcast_parameters().
  uint64_t parameter_checksum() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Bucket {
    size_t begin = 0, end = 0;           // flat element range
    size_t pending = 0, num_params = 0;  // parameters still to become ready
    WorkPtr work;
    std::vector<uint16_t> wire;          // 16-bit copy when compressing
    Clock::time_point launched, done;
  };
  void on_grad_ready(const ParamInfo& p);
  void launch(Bucket& b);

  Module& model_;
  Communicator* comm_;
  DdpConfig config_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_param_;
  bool sync_ = true;
  bool device_buckets_ = false;  // the model is on CUDA and the wire is f32 (see ddp.cpp)
  size_t next_launch_ = 0;  // buckets launch strictly in order on every rank
  CommStats stats_;
};

}  // namespace dpt
