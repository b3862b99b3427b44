#include "models/nn/layers/basic_block.h"

#include <algorithm>
#include <stdexcept>

#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cpu/parallel_for.h"

namespace dpt {
namespace {
const Tensor& rounded(const Tensor& t, bool fp16) {
  if (fp16) round_produced_to_f16(t);
  return t;
}
}  // namespace

BasicBlock::BasicBlock(ParamStore& store, const std::string& name, int64_t in_planes, int64_t planes,
                       int64_t stride)
    : Layer(name),
      conv1_(store, join_name(name, "conv1"), in_planes, planes, 3, stride, 1, false, ConvInit::kKaimingNormalFanOut),
      bn1_(store, join_name(name, "bn1"), planes, /*fuse_relu=*/true),
      conv2_(store, join_name(name, "conv2"), planes, planes, 3, 1, 1, false, ConvInit::kKaimingNormalFanOut),
      bn2_(store, join_name(name, "bn2"), planes) {
  if (stride != 1 || in_planes != planes) {
    ds_conv_ = std::make_unique<Conv2d>(store, join_name(name, "downsample.0"), in_planes, planes, 1, stride, 0,
                                        false, ConvInit::kKaimingNormalFanOut);
    ds_bn_ = std::make_unique<BatchNorm>(store, join_name(name, "downsample.1"), planes);
  }
}

void BasicBlock::init_params(ParamStore& store, uint64_t seed) {
  conv1_.init_params(store, seed);
  bn1_.init_params(store, seed);
  conv2_.init_params(store, seed);
  bn2_.init_params(store, seed);
  if (ds_conv_) {
    ds_conv_->init_params(store, seed);
    ds_bn_->init_params(store, seed);
  }
}

std::vector<size_t> BasicBlock::used_params() const {
  std::vector<size_t> p;
  std::vector<const Layer*> parts{&conv1_, &bn1_, &conv2_, &bn2_};
  if (ds_conv_) parts.insert(parts.end(), {ds_conv_.get(), ds_bn_.get()});
  for (const Layer* l : parts)
    for (size_t i : l->used_params()) p.push_back(i);
  return p;
}

const Tensor& BasicBlock::forward(const Tensor& in, const ForwardContext& ctx) {
  fp16_ = ctx.precision == ComputePrecision::kF16;
  const Tensor& a = rounded(bn1_.forward(rounded(conv1_.forward(in, ctx), fp16_), ctx), fp16_);
  const Tensor& main = rounded(bn2_.forward(rounded(conv2_.forward(a, ctx), fp16_), ctx), fp16_);
  const Tensor* identity = &in;
  if (ds_conv_) identity = &rounded(ds_bn_->forward(rounded(ds_conv_->forward(in, ctx), fp16_), ctx), fp16_);
  if (identity->shape() != main.shape())
    throw std::logic_error(name() + ": residual shapes differ: " + shape_to_string(identity->shape()) + " vs " +
                           shape_to_string(main.shape()));
  out_.set_device(main.device());
  out_.resize(main.shape());
  const float* m = main.data();
  const float* id = identity->data();
  float* o = out_.data();
  const size_t n = out_.numel();
  if (main.on_cuda()) {
    gpu::add(m, id, o, n);
    gpu::relu_forward(o, o, n);
    return out_;
  }
  parallel_for(static_cast<int64_t>(n), parallel_grain(1), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) o[i] = std::max(m[i] + id[i], 0.0f);
  });
  return out_;
}

const Tensor& BasicBlock::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  // Through the final ReLU: g = dout where out > 0.
  g_.set_device(dout.device());
  g_.resize(dout.shape());
  const float* dy = dout.data();
  const float* o = out_.data();
  float* g = g_.data();
  const size_t n = g_.numel();
  const bool cuda = dout.on_cuda();
  if (cuda) gpu::relu_backward(o, dy, g, n);
  else parallel_for(static_cast<int64_t>(n), parallel_grain(1), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const float v = dy[i];  // loaded unconditionally, so the select vectorises
      g[i] = o[i] > 0.0f ? v : 0.0f;
    }
  });
  // The downsample branch first: its parameters were registered last.
  const Tensor* d_identity = &g_;
  if (ds_conv_)
    d_identity = &rounded(ds_conv_->backward(rounded(ds_bn_->backward(g_, sink, true), fp16_), sink,
                                             need_input_grad),
                          fp16_);
  const Tensor& d_a = rounded(conv2_.backward(rounded(bn2_.backward(g_, sink, true), fp16_), sink, true), fp16_);
  const Tensor& d_in = conv1_.backward(rounded(bn1_.backward(d_a, sink, true), fp16_), sink, need_input_grad);
  if (!need_input_grad) return dx_;
  dx_.set_device(d_in.device());
  dx_.resize(d_in.shape());
  const float* p = d_in.data();
  const float* q = d_identity->data();
  float* dx = dx_.data();
  if (cuda) {
    gpu::add(p, q, dx, dx_.numel());
    return dx_;
  }
  parallel_for(static_cast<int64_t>(dx_.numel()), parallel_grain(1), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) dx[i] = p[i] + q[i];
  });
  return dx_;
}

}  // namespace dpt
