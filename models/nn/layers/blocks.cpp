#include "models/nn/layers/blocks.h"

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

}  // namespace dpt
