#include "models/nn/layers/gpt_block.h"

#include "models/kernels/cuda/gpu_ops.h"

#include <cmath>

#include "models/kernels/cpu/parallel_for.h"

namespace dpt {
namespace {
void add(const Tensor& a, const Tensor& b, Tensor& out) {
  out.resize_like(a);
  const float* pa = a.data();
  const float* pb = b.data();
  float* po = out.data();
  const size_t n = a.numel();
  if (a.on_cuda()) return gpu::add(pa, pb, po, n);
  parallel_for(static_cast<int64_t>(n), int64_t{1} << 15, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) po[i] = pa[i] + pb[i];
  });
}
}  // namespace

GptBlock::GptBlock(ParamStore& store, const std::string& name, const GptBlockSpec& spec)
    : Layer(name),
      ln1_(store, join_name(name, spec.ln1()), spec.dim, spec.ln_eps),
      attn_(store, join_name(name, "attn"), spec),
      ln2_(store, join_name(name, spec.ln2()), spec.dim, spec.ln_eps),
      fc_(store, join_name(name, spec.fc()), spec.dim, 4 * spec.dim, true, LinearInit::kGpt2, 0.02f, spec.layout()),
      gelu_(join_name(name, "mlp.gelu")),
      proj_(store, join_name(name, spec.mlp_proj()), 4 * spec.dim, spec.dim, true, LinearInit::kGpt2,
            0.02f / std::sqrt(2.0f * static_cast<float>(spec.n_layer)), spec.layout()),
      mlp_drop_(join_name(name, "mlp.dropout"), spec.dropout) {}

void GptBlock::init_params(ParamStore& store, uint64_t seed) {
  ln1_.init_params(store, seed);
  attn_.init_params(store, seed);
  ln2_.init_params(store, seed);
  fc_.init_params(store, seed);
  proj_.init_params(store, seed);
  mlp_drop_.init_params(store, seed);
}

std::vector<size_t> GptBlock::used_params() const {
  std::vector<size_t> p;
  for (const Layer* l : std::initializer_list<const Layer*>{&ln1_, &attn_, &ln2_, &fc_, &proj_})
    for (size_t i : l->used_params()) p.push_back(i);
  return p;
}

const Tensor& GptBlock::forward(const Tensor& in, const ForwardContext& ctx) {
  const Tensor& a = attn_.forward(ln1_.forward(in, ctx), ctx);
  add(in, a, x2_);
  const Tensor& m = proj_.forward(gelu_.forward(fc_.forward(ln2_.forward(x2_, ctx), ctx), ctx), ctx);
  add(x2_, mlp_drop_.forward(m, ctx), out_);
  return out_;
}

const Tensor& GptBlock::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const Tensor& d_gelu = proj_.backward(mlp_drop_.backward(dout, sink, true), sink, true);
  const Tensor& d_fc = gelu_.backward(d_gelu, sink, true);
  const Tensor& d_ln2 = fc_.backward(d_fc, sink, true);
  const Tensor& d_x2_branch = ln2_.backward(d_ln2, sink, true);
  add(dout, d_x2_branch, dx2_);  // skip path + MLP branch
  const Tensor& d_ln1 = attn_.backward(dx2_, sink, true);
  const Tensor& d_x_branch = ln1_.backward(d_ln1, sink, need_input_grad);
  if (need_input_grad) add(dx2_, d_x_branch, dx_);
  return dx_;
}

}  // namespace dpt
