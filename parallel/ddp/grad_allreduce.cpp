#include "parallel/ddp/grad_allreduce.h"

#include <stdexcept>

#include "models/cuda/gpu_ops.h"
#include "parallel/precision/wire16.h"

namespace dpt {

GradAllreduce::GradAllreduce(Module& model, Communicator& comm, const DdpConfig& config)
    : model_(model),
      comm_(&comm),
      config_(config),
      scheduler_(model, config.first_bucket_bytes, config.bucket_bytes, config.overlap, /*complete_early=*/false,
                 BucketOps{[this](size_t) {
                             // Device buckets are read by another stream or thread: the
                             // kernels producing them must be done (not comm time).
                             if (device_buckets_) gpu::wait_for_kernels();
                           },
                           [this](size_t i, const BucketRange& b, std::vector<WorkPtr>& works) {
                             return launch(b, works, wire_[i]);
                           },
                           [this](size_t i, const BucketRange& b) { complete(b, wire_[i]); }}) {
  if (config_.wire != DType::f32 && config_.wire != DType::bf16 && config_.wire != DType::f16)
    throw std::invalid_argument("DDP gradient compression must be none (f32), bf16 or f16");
  wire_.resize(scheduler_.num_buckets());
  choose_device_buckets();
}

GradAllreduce::~GradAllreduce() { model_.set_grad_download(true); }

void GradAllreduce::choose_device_buckets() {
  device_buckets_ = model_.on_cuda() && config_.wire == DType::f32 &&
                    (config_.force_device_buckets ||
                     comm_->takes_device_collective(CollKind::allreduce, DType::f32, 1, ReduceOp::avg));
  model_.set_grad_download(!device_buckets_);
}

void GradAllreduce::set_communicator(Communicator& comm) {
  if (scheduler_.in_flight()) throw std::logic_error("DDP: set_communicator while a bucket is still in flight");
  comm_ = &comm;
  choose_device_buckets();
}

size_t GradAllreduce::comm_buffer_bytes() const {
  size_t n = 0;
  for (const auto& w : wire_) n += w.capacity() * sizeof(uint16_t);
  return n;
}

int64_t GradAllreduce::launch(const BucketRange& b, std::vector<WorkPtr>& works, std::vector<uint16_t>& wire) {
  const size_t n = b.end - b.begin;
  if (device_buckets_) {
    Buffer buf{model_.store().device_flat_grads() + b.begin, n, DType::f32, Device{DeviceKind::cuda, gpu::current_device()}};
    works.push_back(comm_->allreduce_async(buf, buf, ReduceOp::avg));
  } else if (config_.wire == DType::f32) {
    Buffer buf{model_.flat_grads().data() + b.begin, n, DType::f32, {}};
    works.push_back(comm_->allreduce_async(buf, buf, ReduceOp::avg));
  } else {
    // Divide before rounding (as PyTorch's fp16 compression hook does) so the sum of
    // world-size terms stays in range.
    wire.resize(n);
    pack16(config_.wire, model_.flat_grads().data() + b.begin, wire.data(), n, 1.0f / float(comm_->size()));
    Buffer buf{wire.data(), n, config_.wire, {}};
    works.push_back(comm_->allreduce_async(buf, buf, ReduceOp::sum));
  }
  return int64_t(n * dtype_size(config_.wire));
}

void GradAllreduce::complete(const BucketRange& b, std::vector<uint16_t>& wire) {
  if (config_.wire != DType::f32) unpack16(config_.wire, wire.data(), model_.flat_grads().data() + b.begin, b.end - b.begin);
  if (device_buckets_) model_.store().download_grads(b.begin, b.end);
}

}  // namespace dpt
