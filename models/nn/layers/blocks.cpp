#include "models/nn/layers/blocks.h"

#include <algorithm>
#include <stdexcept>

namespace dpt {

void SequentialBlock::init_params(ParamStore& store, uint64_t seed) {
  has_params_below_.clear();
  bool below = false;
  for (auto& layer : layers_) {
    has_params_below_.push_back(below);
    below = below || !layer->used_params().empty();
    layer->init_params(store, seed);
  }
}

const Tensor& SequentialBlock::forward(const Tensor& in, const ForwardContext& ctx) {
  if (layers_.empty()) throw std::logic_error(name() + ": a block without layers");
  fp16_ = ctx.precision == ComputePrecision::kF16;
  const Tensor* cur = &in;
  for (size_t i = 0; i < layers_.size(); ++i) {
    cur = &layers_[i]->forward(*cur, ctx);
    if (fp16_ && i + 1 < layers_.size()) round_produced_to_f16(*cur);
  }
  return *cur;
}

const Tensor& SequentialBlock::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const Tensor* g = &dout;
  for (size_t i = layers_.size(); i-- > 0;) {
    // The first child's input gradient only when the caller wants it; an inner child's
    // whenever a parameter lies below it in this block or the caller wants the block's.
    const bool need = i == 0 ? need_input_grad : (need_input_grad || has_params_below_[i]);
    g = &layers_[i]->backward(*g, sink, need);
    if (fp16_ && i > 0 && need) round_produced_to_f16(*g);
  }
  return *g;
}

std::vector<size_t> SequentialBlock::used_params() const {
  std::vector<size_t> out;
  for (const auto& layer : layers_)
    for (size_t p : layer->used_params()) out.push_back(p);
  return out;
}

ResidualBlock::ResidualBlock(std::string name, std::unique_ptr<SequentialBlock> body,
                             std::unique_ptr<SequentialBlock> shortcut)
    : Layer(std::move(name)), body_(std::move(body)), shortcut_(std::move(shortcut)) {
  if (!body_ || body_->empty()) throw std::invalid_argument(this->name() + ": a residual block needs a body");
  if (shortcut_ && shortcut_->empty()) shortcut_.reset();
}

void ResidualBlock::init_params(ParamStore& store, uint64_t seed) {
  body_->init_params(store, seed);
  if (shortcut_) shortcut_->init_params(store, seed);
}

const Tensor& ResidualBlock::forward(const Tensor& in, const ForwardContext& ctx) {
  if (in.on_cuda()) throw std::logic_error(name() + ": residual blocks run on the CPU only");
  const Tensor& a = body_->forward(in, ctx);
  const Tensor& b = shortcut_ ? shortcut_->forward(in, ctx) : in;
  if (a.shape() != b.shape())
    throw std::invalid_argument(name() + ": the body's output " + shape_to_string(a.shape()) +
                                " and the shortcut's " + shape_to_string(b.shape()) +
                                " differ (give the block a shortcut that matches)");
  y_.resize(a.shape());
  const float* pa = a.data();
  const float* pb = b.data();
  float* py = y_.data();
  for (size_t i = 0; i < y_.numel(); ++i) py[i] = pa[i] + pb[i];
  return y_;
}

const Tensor& ResidualBlock::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  // Shortcut first: its parameters were registered after the body's.
  const Tensor* ds = shortcut_ ? &shortcut_->backward(dout, sink, need_input_grad) : &dout;
  if (!need_input_grad) {
    body_->backward(dout, sink, false);
    dx_.resize({0});
    return dx_;
  }
  // The shortcut's gradient may be a buffer the body overwrites (never: distinct layers),
  // but `dout` itself is the caller's: copy before the body runs.
  dx_.resize(ds->shape());
  std::copy(ds->data(), ds->data() + ds->numel(), dx_.data());
  const Tensor& db = body_->backward(dout, sink, true);
  float* px = dx_.data();
  const float* pd = db.data();
  for (size_t i = 0; i < dx_.numel(); ++i) px[i] += pd[i];
  return dx_;
}

std::vector<size_t> ResidualBlock::used_params() const {
  std::vector<size_t> out = body_->used_params();
  if (shortcut_)
    for (size_t p : shortcut_->used_params()) out.push_back(p);
  return out;
}


InputsBlock::InputsBlock(std::string name, std::vector<Branch> branches)
    : Layer(std::move(name)), branches_(std::move(branches)) {
  if (branches_.empty()) throw std::invalid_argument(this->name() + ": an inputs block without inputs");
  for (const Branch& b : branches_) {
    if (!b.layers || b.layers->empty()) throw std::invalid_argument(this->name() + ": an input without layers");
    in_numel_.push_back(shape_numel(b.shape));
  }
  inputs_.resize(branches_.size());
  grads_.resize(branches_.size());
  out_numel_.resize(branches_.size());
  out_shapes_.resize(branches_.size());
}

void InputsBlock::init_params(ParamStore& store, uint64_t seed) {
  for (Branch& b : branches_) b.layers->init_params(store, seed);
}

const Tensor& InputsBlock::forward(const Tensor& in, const ForwardContext& ctx) {
  if (in.on_cuda()) throw std::logic_error(name() + ": inputs blocks run on the CPU only");
  size_t per_sample = 0;
  for (size_t v : in_numel_) per_sample += v;
  n_ = in.rank() > 0 ? in.dim(0) : 0;
  if (n_ == 0 || in.numel() != size_t(n_) * per_sample)
    throw std::invalid_argument(name() + ": the input has shape " + shape_to_string(in.shape()) + "; its inputs need " +
                                std::to_string(per_sample) + " values per sample");
  size_t offset = 0, out_total = 0;
  std::vector<const Tensor*> outs;
  for (size_t b = 0; b < branches_.size(); ++b) {
    std::vector<int64_t> shape{n_};
    shape.insert(shape.end(), branches_[b].shape.begin(), branches_[b].shape.end());
    inputs_[b].resize(std::move(shape));
    for (int64_t i = 0; i < n_; ++i)
      std::copy(in.data() + size_t(i) * per_sample + offset, in.data() + size_t(i) * per_sample + offset + in_numel_[b],
                inputs_[b].data() + size_t(i) * in_numel_[b]);
    offset += in_numel_[b];
    const Tensor& out = branches_[b].layers->forward(inputs_[b], ctx);
    out_shapes_[b] = out.shape();
    out_numel_[b] = out.numel() / size_t(n_);
    out_total += out_numel_[b];
    outs.push_back(&out);
  }
  y_.resize({n_, int64_t(out_total)});
  size_t at = 0;
  for (size_t b = 0; b < branches_.size(); ++b) {
    for (int64_t i = 0; i < n_; ++i)
      std::copy(outs[b]->data() + size_t(i) * out_numel_[b], outs[b]->data() + size_t(i + 1) * out_numel_[b],
                y_.data() + size_t(i) * out_total + at);
    at += out_numel_[b];
  }
  return y_;
}

const Tensor& InputsBlock::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  size_t out_total = 0, per_sample = 0;
  for (size_t v : out_numel_) out_total += v;
  for (size_t v : in_numel_) per_sample += v;
  if (need_input_grad) {
    dx_.resize({n_, int64_t(per_sample)});
    dx_.zero();
  } else {
    dx_.resize({0});
  }
  // The last branch first: its parameters were registered last.
  size_t at = out_total, in_at = per_sample;
  for (size_t b = branches_.size(); b-- > 0;) {
    at -= out_numel_[b];
    in_at -= in_numel_[b];
    grads_[b].resize(out_shapes_[b]);
    for (int64_t i = 0; i < n_; ++i)
      std::copy(dout.data() + size_t(i) * out_total + at, dout.data() + size_t(i) * out_total + at + out_numel_[b],
                grads_[b].data() + size_t(i) * out_numel_[b]);
    const Tensor& g = branches_[b].layers->backward(grads_[b], sink, need_input_grad);
    if (!need_input_grad) continue;
    for (int64_t i = 0; i < n_; ++i)
      std::copy(g.data() + size_t(i) * in_numel_[b], g.data() + size_t(i + 1) * in_numel_[b],
                dx_.data() + size_t(i) * per_sample + in_at);
  }
  return dx_;
}

std::vector<size_t> InputsBlock::used_params() const {
  std::vector<size_t> out;
  for (const Branch& b : branches_)
    for (size_t p : b.layers->used_params()) out.push_back(p);
  return out;
}

}  // namespace dpt
