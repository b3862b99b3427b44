#include "optim/ddp.h"

#include <cstring>
#include <mutex>
#include <stdexcept>

#include "optim/bucket_plan.h"

#include "models/cuda/gpu_ops.h"
#include "optim/wire16.h"

namespace dpt {

DistributedDataParallel::DistributedDataParallel(Module& model, Communicator& comm, DdpConfig config)
    : model_(model), comm_(&comm), config_(config) {
  if (config_.wire != DType::f32 && config_.wire != DType::bf16 && config_.wire != DType::f16)
    throw std::invalid_argument("DDP gradient compression must be none (f32), bf16 or f16");
  BucketPlan plan = plan_buckets(model.param_infos(), config_.first_bucket_bytes, config_.bucket_bytes);
  buckets_ = make_buckets<Bucket>(plan);
  bucket_of_param_ = std::move(plan.bucket_of_param);
  // A model on CUDA: f32 buckets are reduced where the gradients are, as device buffers
  // (NCCL natively, mpi/tcp staged through pinned memory), and only the averaged
  // gradients come down to the host buffer the optimizer reads, once per step.
  // Compressed wires pack on the host, from gradients downloaded as they become final.
  device_buckets_ = model.on_cuda() && config_.wire == DType::f32;
  model.set_grad_download(!device_buckets_);

  ModuleHooks hooks = model.hooks();
  hooks.on_grad_ready = [this](const ParamInfo& p) { on_grad_ready(p); };
  model.set_hooks(hooks);
}

DistributedDataParallel::~DistributedDataParallel() {
  ModuleHooks hooks = model_.hooks();
  hooks.on_grad_ready = nullptr;
  model_.set_hooks(hooks);
  model_.set_grad_download(true);
}

uint64_t DistributedDataParallel::parameter_checksum() const {
  auto params = static_cast<const Module&>(model_).flat_params();
  const auto* p = reinterpret_cast<const unsigned char*>(params.data());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < params.size_bytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

size_t DistributedDataParallel::comm_buffer_bytes() const {
  size_t n = 0;
  for (const auto& b : buckets_) n += b.wire.capacity() * sizeof(uint16_t);
  return n;
}

void DistributedDataParallel::broadcast_parameters() {
  auto params = model_.flat_params();
  comm_->broadcast(Buffer{params.data(), params.size(), DType::f32, {}}, 0);
  uint64_t mine = parameter_checksum();
  std::vector<uint64_t> all(comm_->size());
  comm_->allgather(make_buffer(reinterpret_cast<int64_t*>(&mine), 1),
                   make_buffer(reinterpret_cast<int64_t*>(all.data()), all.size()));
  std::string bad;
  for (int r = 0; r < comm_->size(); ++r)
    if (all[r] != all[0]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (!bad.empty())
    throw std::runtime_error("DDP: after broadcasting rank 0's parameters, ranks [" + bad +
                             "] hold different bytes (checksum mismatch)");
}

void DistributedDataParallel::set_communicator(Communicator& comm) {
  for (auto& b : buckets_)
    if (b.work && !b.work->test())
      throw std::logic_error("DDP: set_communicator while a bucket is still in flight");
  comm_ = &comm;
}

void DistributedDataParallel::begin_backward(bool sync) {
  sync_ = sync;
  next_launch_ = 0;
  for (auto& b : buckets_) {
    b.pending = b.num_params;
    b.work.reset();
  }
}

void DistributedDataParallel::on_grad_ready(const ParamInfo& p) {
  if (!sync_) return;
  Bucket& b = buckets_[bucket_of_param_[p.index]];
  if (b.pending == 0) throw std::logic_error("DDP: gradient of " + p.name + " reported ready twice");
  --b.pending;
  if (!config_.overlap) return;
  // Launch every consecutive ready bucket, in order: all ranks issue the same sequence.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) launch(buckets_[next_launch_++]);
}

void DistributedDataParallel::launch(Bucket& b) {
  auto grads = model_.flat_grads();
  float* g = grads.data() + b.begin;
  const size_t n = b.end - b.begin;
  b.launched = Clock::now();
  if (device_buckets_) {
    // The bucket's gradients come from kernels on the compute stream; the collective
    // reads them from another stream (NCCL's) or thread (staging), so they must be done.
    gpu::wait_for_kernels();
    b.launched = Clock::now();  // comm time starts when the data can move
    Buffer buf{model_.store().device_flat_grads() + b.begin, n, DType::f32, Device{DeviceKind::cuda, gpu::current_device()}};
    b.work = comm_->allreduce_async(buf, buf, ReduceOp::avg);
  } else if (config_.wire == DType::f32) {
    Buffer buf{g, n, DType::f32, {}};
    b.work = comm_->allreduce_async(buf, buf, ReduceOp::avg);
  } else {
    // Divide before rounding (as PyTorch's fp16 compression hook does) so the sum of
    // world-size terms stays in range.
    b.wire.resize(n);
    pack16(config_.wire, g, b.wire.data(), n, 1.0f / float(comm_->size()));
    Buffer buf{b.wire.data(), n, config_.wire, {}};
    b.work = comm_->allreduce_async(buf, buf, ReduceOp::sum);
  }
  if (auto pw = std::dynamic_pointer_cast<PromiseWork>(b.work)) {
    Bucket* bp = &b;
    pw->on_finish([bp] { bp->done = Clock::now(); });
  }
}

void DistributedDataParallel::end_backward() {
  stats_ = CommStats{};
  if (!sync_) return;
  for (auto& b : buckets_)
    if (b.pending != 0) throw std::logic_error("DDP: backward ended with gradients not reported ready");
  const auto compute_end = Clock::now();
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
  for (auto& b : buckets_) b.work->wait(comm_->timeout());
  const auto all_done = Clock::now();
  auto grads = model_.flat_grads();
  Clock::time_point prev_done{};
  Clock::time_point last_done{};
  for (auto& b : buckets_) {
    if (b.done == Clock::time_point{}) b.done = all_done;  // backend without completion times
    const auto start = std::max(b.launched, prev_done);
    stats_.comm_s += std::chrono::duration<double>(b.done - start).count();
    prev_done = b.done;
    last_done = std::max(last_done, b.done);
    stats_.bytes += int64_t((b.end - b.begin) * dtype_size(config_.wire));
    if (config_.wire != DType::f32) unpack16(config_.wire, b.wire.data(), grads.data() + b.begin, b.end - b.begin);
    if (device_buckets_) model_.store().download_grads(b.begin, b.end);
    b.done = Clock::time_point{};
  }
  stats_.exposed_s = std::max(0.0, std::chrono::duration<double>(last_done - compute_end).count());
  stats_.exposed_s = std::min(stats_.exposed_s, stats_.comm_s);
}

}  // namespace dpt
