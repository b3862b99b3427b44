#include "parallel/zero/zero_param_refresher.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "parallel/precision/wire16.h"

namespace dpt {

ZeroParamRefresher::ZeroParamRefresher(Module& model, Communicator& comm, const ShardLayout& layout,
                                       size_t piece_bytes, DType wire)
    : model_(model), comm_(&comm), layout_(layout), wire_(wire) {
  if (wire_ != DType::f32) check_wire16(wire_, "ZeRO parameter refresh");
  const size_t step = std::max<size_t>(1, piece_bytes / sizeof(float));
  for (size_t i = 0; i < layout_.numel;) {
    const int owner = layout_.owner(i);
    const size_t e = std::min({layout_.numel, layout_.end(owner), i + step});
    pieces_.push_back({i, e, owner});
    i = e;
  }
  // A layer is due when the piece holding its highest element has arrived.
  for (const LayerInfo& info : model.layer_infos()) {
    size_t last = 0;
    for (auto [b, e] : info.ranges)
      if (e > b) {
        const auto it = std::upper_bound(pieces_.begin(), pieces_.end(), e - 1,
                                         [](size_t x, const Piece& p) { return x < p.end; });
        last = std::max(last, size_t(it - pieces_.begin()) + 1);
      }
    due_.push_back(last);
  }
  ModuleHooks hooks = model.hooks();
  hooks.on_layer_forward = [this](size_t layer) {
    if (due_[layer] > next_wait_ && !works_.empty()) wait_through(due_[layer] - 1);
  };
  model.set_hooks(hooks);
}

ZeroParamRefresher::~ZeroParamRefresher() {
  ModuleHooks hooks = model_.hooks();
  hooks.on_layer_forward = nullptr;
  model_.set_hooks(hooks);
}

void ZeroParamRefresher::set_communicator(Communicator& comm) {
  settle();
  comm_ = &comm;
}

int64_t ZeroParamRefresher::launch() {
  settle();
  float* params = model_.flat_params().data();
  const int me = comm_->rank();
  int64_t bytes = 0;
  launched_ = Clock::now();
  for (const Piece& p : pieces_) {
    const size_t n = p.end - p.begin;
    bytes += int64_t(n * dtype_size(wire_));
    if (wire_ == DType::f32) {
      works_.push_back(comm_->broadcast_async(Buffer{params + p.begin, n, DType::f32, {}}, p.owner));
      continue;
    }
    auto& stage = staged_.emplace_back(n);
    if (p.owner == me) pack16(wire_, params + p.begin, stage.data(), n);
    works_.push_back(comm_->broadcast_async(Buffer{stage.data(), n, wire_, {}}, p.owner));
  }
  next_wait_ = 0;
  done_ = Clock::time_point{};
  if (!works_.empty())
    if (auto pw = std::dynamic_pointer_cast<PromiseWork>(works_.back())) pw->on_finish([this] { done_ = Clock::now(); });
  return bytes;
}

void ZeroParamRefresher::wait_through(size_t last) {
  if (works_.empty()) return;  // nothing launched (a step the fp16 loss scaler skipped)
  const auto t0 = Clock::now();
  float* params = model_.flat_params().data();
  const int me = comm_->rank();
  for (; next_wait_ <= last && next_wait_ < works_.size(); ++next_wait_) {
    works_[next_wait_]->wait(comm_->timeout());
    const Piece& p = pieces_[next_wait_];
    if (!staged_.empty() && p.owner != me) unpack16(wire_, staged_[next_wait_].data(), params + p.begin, p.end - p.begin);
  }
  const auto now = Clock::now();
  exposed_s_ += std::chrono::duration<double>(now - t0).count();
  if (next_wait_ == works_.size()) {
    // Collectives finish in issue order: the last piece's completion ends the refresh.
    const Clock::time_point done = done_ == Clock::time_point{} ? now : done_;
    comm_s_ += std::chrono::duration<double>(done - launched_).count();
    works_.clear();
    staged_.clear();
    next_wait_ = 0;
  }
}

void ZeroParamRefresher::settle() {
  if (!works_.empty()) wait_through(works_.size() - 1);
}

}  // namespace dpt
