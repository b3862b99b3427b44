#include "parallel/zero/zero_grad_reducer.h"

#include <stdexcept>

#include "device/runtime.h"
#include "models/kernels/cpu/page_memory.h"
#include "parallel/precision/wire16.h"

namespace dpt {

ZeroGradReducer::ZeroGradReducer(Module& model, Communicator& comm, const ShardLayout& layout, const DdpConfig& config,
                                 std::span<float> grad_shard, float* device_grad_shard)
    : model_(model),
      comm_(&comm),
      layout_(layout),
      config_(config),
      grad_shard_(grad_shard),
      device_grad_shard_(device_grad_shard),
      scheduler_(model, config.first_bucket_bytes, config.bucket_bytes, config.overlap, /*complete_early=*/true,
                 BucketOps{[this](size_t) {
                             // Device pieces are read by another stream or thread: the
                             // kernels producing them must be done (not comm time).
                             if (device_grad_shard_) device::wait_for_kernels();
                           },
                           [this](size_t i, const BucketRange& b, std::vector<WorkPtr>& works) { return launch(i, b, works); },
                           [this](size_t i, const BucketRange& b) { complete(i, b); }}) {
  if (config_.wire != DType::f32) check_wire16(config_.wire, "ZeRO-2 gradient reduction");
  if (grad_shard_.size() != layout_.shard) throw std::logic_error("ZeRO-2: gradient shard has the wrong size");
  if (device_grad_shard_) {
    if (config_.wire != DType::f32) throw std::logic_error("ZeRO-2: device pieces are reduced in f32 only");
    model_.set_grad_download(false);  // the gradients stay on the device
  }
  // Buckets exactly as DDP cuts them, then cut at shard boundaries: one piece per
  // owner the bucket touches.
  for (const BucketRange& b : scheduler_.buckets()) {
    auto& pieces = pieces_.emplace_back();
    for (size_t i = b.begin; i < b.end;) {
      const int owner = layout_.owner(i);
      const size_t e = std::min(b.end, layout_.end(owner));
      pieces.push_back({i, e, owner});
      i = e;
    }
  }
  wire_.resize(scheduler_.num_buckets());
}

void ZeroGradReducer::set_communicator(Communicator& comm) {
  if (scheduler_.in_flight()) throw std::logic_error("ZeRO-2: set_communicator while a reduce is still in flight");
  comm_ = &comm;
}

int64_t ZeroGradReducer::launch(size_t i, const BucketRange& b, std::vector<WorkPtr>& works) {
  // Device mode reads the device gradients: no host view (which would download them all).
  float* grads = device_grad_shard_ ? nullptr : model_.flat_grads().data();
  const int me = comm_->rank();
  if (config_.wire != DType::f32) {
    // 16-bit: divide, round, sum on the wire (as DDP's compression); every rank
    // reduces in place in the bucket's 16-bit copy, the owner widens its pieces later.
    auto& wire = wire_[i];
    wire.resize(b.end - b.begin);
    pack16(config_.wire, grads + b.begin, wire.data(), wire.size(), 1.0f / float(comm_->size()));
    for (const Piece& pc : pieces_[i]) {
      Buffer buf{wire.data() + (pc.begin - b.begin), pc.end - pc.begin, config_.wire, {}};
      works.push_back(comm_->reduce_async(buf, buf, ReduceOp::sum, pc.owner));
    }
  } else if (device_grad_shard_) {
    const Device d = device::current();
    float* device_grads = model_.store().device_flat_grads();
    for (const Piece& pc : pieces_[i]) {
      Buffer send{device_grads + pc.begin, pc.end - pc.begin, DType::f32, d};
      Buffer recv = pc.owner == me ? Buffer{device_grad_shard_ + (pc.begin - layout_.begin(me)), pc.end - pc.begin,
                                            DType::f32, d}
                                   : send;
      works.push_back(comm_->reduce_async(send, recv, ReduceOp::avg, pc.owner));
    }
  } else {
    for (const Piece& pc : pieces_[i]) {
      Buffer send{grads + pc.begin, pc.end - pc.begin, DType::f32, {}};
      // The owner receives into its shard; the others pass their own slice (unused).
      Buffer recv = pc.owner == me ? Buffer{grad_shard_.data() + (pc.begin - layout_.begin(me)), pc.end - pc.begin,
                                            DType::f32, {}}
                                   : send;
      works.push_back(comm_->reduce_async(send, recv, ReduceOp::avg, pc.owner));
    }
  }
  return int64_t((b.end - b.begin) * dtype_size(config_.wire));
}

void ZeroGradReducer::complete(size_t i, const BucketRange& b) {
  if (device_grad_shard_) return;  // the device buffer is zeroed by the next zero_grad
  float* grads = model_.flat_grads().data();
  if (config_.wire != DType::f32) {
    const int me = comm_->rank();
    for (const Piece& pc : pieces_[i])
      if (pc.owner == me)
        unpack16(config_.wire, wire_[i].data() + (pc.begin - b.begin), grad_shard_.data() + (pc.begin - layout_.begin(me)),
                 pc.end - pc.begin);
    std::vector<uint16_t>().swap(wire_[i]);  // only buckets in flight hold a 16-bit copy
  }
  release_slice(grads + b.begin, grads + b.end);
}

}  // namespace dpt
