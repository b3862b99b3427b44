#include "parallel/ddp/grad_allreduce.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include "device/runtime.h"
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
                             if (device_buckets_) device::wait_for_kernels();
                           },
                           [this](size_t i, const BucketRange& b, std::vector<WorkPtr>& works) {
                             if (compress_now_) {
                               const auto payload = powersgd_[i]->compress(model_.flat_grads());
                               Buffer buf{payload.data(), payload.size(), DType::f32, {}};
                               works.push_back(comm_->allreduce_async(buf, buf, ReduceOp::avg));
                               return int64_t(payload.size() * sizeof(float));
                             }
                             return launch(b, works, wire_[i]);
                           },
                           [this](size_t i, const BucketRange& b) {
                             if (compress_now_) complete_powersgd(i);
                             else complete(b, wire_[i]);
                           }}) {
  if (config_.wire != DType::f32 && config_.wire != DType::bf16 && config_.wire != DType::f16)
    throw std::invalid_argument("DDP gradient compression must be none (f32), bf16 or f16");
  wire_.resize(scheduler_.num_buckets());
  if (config_.powersgd.rank != 0) {
    if (config_.wire != DType::f32)
      throw std::invalid_argument("--grad-compress powersgd sends fp32 P and Q: it cannot be combined with a 16-bit wire (--precision bf16|fp16)");
    if (model_.on_cuda())
      throw std::invalid_argument("--grad-compress powersgd runs on host buckets: not with --device cuda (yet)");
    if (config_.powersgd.start_step < 0)
      throw std::invalid_argument("--powersgd-start-step must be >= 0, got " + std::to_string(config_.powersgd.start_step));
    for (const auto& b : scheduler_.buckets()) {
      std::vector<ParamInfo> params;
      for (const auto& p : model_.param_infos())
        if (p.offset >= b.begin && p.offset < b.end) params.push_back(p);
      powersgd_.push_back(std::make_unique<PowerSgdBucket>(params, config_.powersgd.rank, config_.powersgd.seed));
    }
  }
  choose_device_buckets();
}

void GradAllreduce::begin_backward(bool sync, int64_t steps_done) {
  compress_now_ = !powersgd_.empty() && steps_done >= config_.powersgd.start_step;
  q_stats_ = {};
  scheduler_.begin_backward(sync);
}

CommStats GradAllreduce::end_backward() {
  CommStats s = scheduler_.end_backward(comm_->wait_timeout());
  // Q's allreduces run in the completions, after backward: all of their time is exposed.
  s.bytes += q_stats_.bytes;
  s.comm_s += q_stats_.comm_s;
  s.exposed_s += q_stats_.exposed_s;
  q_stats_ = {};
  return s;
}

GradAllreduce::~GradAllreduce() { model_.set_grad_download(true); }

void GradAllreduce::choose_device_buckets() {
  device_buckets_ = model_.on_cuda() && config_.wire == DType::f32 &&
                    (config_.force_device_buckets || config_.optimizer_on_device ||
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
  for (const auto& p : powersgd_) n += p->state_bytes();
  return n;
}

int64_t GradAllreduce::launch(const BucketRange& b, std::vector<WorkPtr>& works, std::vector<uint16_t>& wire) {
  const size_t n = b.end - b.begin;
  if (device_buckets_) {
    Buffer buf{model_.store().device_flat_grads() + b.begin, n, DType::f32, device::current()};
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

void GradAllreduce::complete_powersgd(size_t i) {
  PowerSgdBucket& c = *powersgd_[i];
  const auto grads = model_.flat_grads();
  const auto q_local = c.project(grads);
  const auto t0 = std::chrono::steady_clock::now();
  WorkPtr q_work;
  if (!q_local.empty()) {
    const auto q_avg = c.q_average();
    q_work = comm_->allreduce_async(Buffer{q_local.data(), q_local.size(), DType::f32, {}},
                                    Buffer{q_avg.data(), q_avg.size(), DType::f32, {}}, ReduceOp::avg);
  }
  c.remember_error(grads);  // while Q travels
  if (q_work) {
    q_work->wait(comm_->wait_timeout());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    q_stats_.comm_s += s;
    q_stats_.exposed_s += s;
    q_stats_.bytes += int64_t(q_local.size() * sizeof(float));
  }
  c.decompress(grads);
}

void GradAllreduce::complete(const BucketRange& b, std::vector<uint16_t>& wire) {
  if (config_.wire != DType::f32) unpack16(config_.wire, wire.data(), model_.flat_grads().data() + b.begin, b.end - b.begin);
  // Device-resident: the optimizer reads the device buckets; nothing comes down.
  if (device_buckets_ && !config_.optimizer_on_device) model_.store().download_grads(b.begin, b.end);
}

}  // namespace dpt
