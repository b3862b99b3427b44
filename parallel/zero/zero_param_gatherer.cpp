#include "parallel/zero/zero_param_gatherer.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "models/kernels/cpu/page_memory.h"
#include "parallel/chunked_p2p.h"
#include "parallel/precision/wire16.h"

namespace dpt {

ZeroParamGatherer::ZeroParamGatherer(Module& model, Communicator& comm, const ShardLayout& layout, bool prefetch,
                                     DType wire)
    : model_(model), comm_(&comm), layout_(layout), prefetch_(prefetch), wire_(wire) {
  if (wire_ != DType::f32) check_wire16(wire_, "ZeRO-3 parameter gather");
  for (const LayerInfo& info : model.layer_infos()) {
    LayerState st;
    for (auto [b, e] : info.ranges)
      for (size_t i = b; i < e;) {
        const int owner = layout_.owner(i);
        const size_t end = std::min(e, layout_.end(owner));
        st.pieces.push_back({i, end, owner});
        i = end;
      }
    layers_.push_back(std::move(st));
  }
  ModuleHooks hooks = model.hooks();
  hooks.on_layer_forward = [this](size_t i) { acquire(i, +1); };
  hooks.on_layer_forward_done = [this](size_t i) { release(i); };
  hooks.on_layer_backward = [this](size_t i) { acquire(i, -1); };
  hooks.on_layer_backward_done = [this](size_t i) { release(i); };
  model.set_hooks(hooks);
}

ZeroParamGatherer::~ZeroParamGatherer() {
  ModuleHooks hooks = model_.hooks();
  hooks.on_layer_forward = hooks.on_layer_forward_done = hooks.on_layer_backward = hooks.on_layer_backward_done = nullptr;
  model_.set_hooks(hooks);
}

void ZeroParamGatherer::set_communicator(Communicator& comm) {
  for (auto& l : layers_)
    for (auto& w : l.works)
      if (w && !w->test()) throw std::logic_error("ZeRO-3: set_communicator while a gather is in flight");
  comm_ = &comm;
}

void ZeroParamGatherer::launch(size_t layer) {
  LayerState& l = layers_[layer];
  if (l.held || l.pieces.empty()) return;
  float* params = model_.flat_params().data();
  for (const Piece& p : l.pieces) {
    bytes_ += int64_t((p.end - p.begin) * dtype_size(wire_));
    if (wire_ == DType::f32) {
      l.works.push_back(comm_->broadcast_async(Buffer{params + p.begin, p.end - p.begin, DType::f32, {}}, p.owner));
      continue;
    }
    auto& stage = l.staged.emplace_back(p.end - p.begin);
    if (p.owner == comm_->rank()) pack16(wire_, params + p.begin, stage.data(), stage.size());
    l.works.push_back(comm_->broadcast_async(Buffer{stage.data(), stage.size(), wire_, {}}, p.owner));
  }
  l.held = true;
  size_t held = 0;  // overlapping pieces of two held layers count twice: an upper bound
  for (const auto& h : layers_)
    if (h.held)
      for (const Piece& p : h.pieces) held += p.owner == comm_->rank() ? 0 : (p.end - p.begin) * sizeof(float);
  peak_gathered_ = std::max(peak_gathered_, held);
}

void ZeroParamGatherer::finish(size_t layer) {
  LayerState& l = layers_[layer];
  for (auto& w : l.works) w->wait(comm_->timeout());
  l.works.clear();
  if (l.staged.empty()) return;
  float* params = model_.flat_params().data();
  for (size_t k = 0; k < l.pieces.size(); ++k)
    if (l.pieces[k].owner != comm_->rank())
      unpack16(wire_, l.staged[k].data(), params + l.pieces[k].begin, l.staged[k].size());
  l.staged.clear();
}

void ZeroParamGatherer::acquire(size_t layer, int direction) {
  launch(layer);
  finish(layer);
  if (!prefetch_) return;
  // The next layer with parameters in this direction, unless it shares a piece with a
  // held layer (its broadcast would write bytes this layer is reading).
  for (long j = long(layer) + direction; j >= 0 && j < long(layers_.size()); j += direction) {
    if (layers_[size_t(j)].pieces.empty()) continue;
    bool clash = false;
    for (const Piece& p : layers_[size_t(j)].pieces) clash = clash || overlaps_held(p, size_t(j));
    if (!clash) launch(size_t(j));
    break;
  }
}

bool ZeroParamGatherer::overlaps_held(const Piece& p, size_t except) const {
  for (size_t k = 0; k < layers_.size(); ++k) {
    if (k == except || !layers_[k].held) continue;
    for (const Piece& q : layers_[k].pieces)
      if (q.begin < p.end && p.begin < q.end) return true;
  }
  return false;
}

void ZeroParamGatherer::release(size_t layer) {
  LayerState& l = layers_[layer];
  if (!l.held) return;
  finish(layer);
  l.held = false;
  float* params = model_.flat_params().data();
  const int me = comm_->rank();
  for (const Piece& p : l.pieces)
    if (p.owner != me && !overlaps_held(p, layer)) release_slice(params + p.begin, params + p.end);
}

void ZeroParamGatherer::gather_all() {
  float* params = model_.flat_params().data();
  std::vector<WorkPtr> works;
  for (int r = 0; r < layout_.world; ++r) {
    const size_t b = std::min(layout_.begin(r), layout_.numel), e = std::min(layout_.end(r), layout_.numel);
    if (b < e) works.push_back(comm_->broadcast_async(Buffer{params + b, e - b, DType::f32, {}}, r));
  }
  for (auto& w : works) w->wait(comm_->timeout());
}

void ZeroParamGatherer::gather_all_to(int root) {
  constexpr int64_t kTagShardToRoot = 7200;
  float* params = model_.flat_params().data();
  const int me = comm_->rank();
  auto range = [&](int r) {
    return std::pair{std::min(layout_.begin(r), layout_.numel), std::min(layout_.end(r), layout_.numel)};
  };
  std::vector<WorkPtr> works;
  if (me != root) {
    const auto [b, e] = range(me);
    works = isend_chunked(*comm_, params + b, e - b, root, kTagShardToRoot);
  } else {
    for (int r = 0; r < layout_.world; ++r) {
      const auto [b, e] = range(r);
      if (r == root) continue;
      for (auto& w : irecv_chunked(*comm_, params + b, e - b, r, kTagShardToRoot)) works.push_back(std::move(w));
    }
  }
  wait_all(works, *comm_);
}

void ZeroParamGatherer::release_all() {
  for (auto& l : layers_) {
    for (auto& w : l.works) w->wait(comm_->timeout());
    l.works.clear();
    l.staged.clear();
    l.held = false;
  }
  float* params = model_.flat_params().data();
  const int me = comm_->rank();
  const size_t b = std::min(layout_.begin(me), layout_.numel), e = std::min(layout_.end(me), layout_.numel);
  release_slice(params, params + b);
  release_slice(params + e, params + layout_.numel);
}

}  // namespace dpt
