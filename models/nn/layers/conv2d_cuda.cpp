// Conv2d's CUDA path (conv2d.h): cuDNN's three passes through gpu_ops.h at the pass's
// GemmPrecision (fp32 on the CUDA cores; bf16 or fp16 operands on tensor cores, as the
// products of the other layers), the bias by two small kernels. The products are recorded
// as the im2col GEMMs over every tap (models/kernels/cpu/gemm.h's FLOP counts), as the oneDNN passes are.
#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cpu/gemm.h"
#include "models/nn/layers/conv2d.h"

namespace dpt {

namespace {
gpu::ConvShape conv_shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t k, int64_t stride,
                          int64_t pad, int64_t oh, int64_t ow, bool bf16, bool f16) {
  return {int(n), int(c), int(h), int(w), int(oc), int(k), int(stride), int(pad), int(oh), int(ow),
          bf16 ? gpu::ConvType::bf16 : f16 ? gpu::ConvType::f16 : gpu::ConvType::f32};
}
}  // namespace

const Tensor& Conv2d::forward_cuda(const Tensor& in) {
  check_input(in);
  planned_.clear();  // the host plan's shape fields are this input's now
  x_ = &in;
  p_ = oh_ * ow_;
  rows_ = c_ * k_ * k_;
  bf16_ = gemm_precision() == GemmPrecision::bf16;  // kept for backward, which runs the same type
  f16_ = gemm_precision() == GemmPrecision::f16;
  use_onednn_ = false;
  y_.set_device(in.device());
  y_.resize({n_, oc_, oh_, ow_});
  gpu::conv2d_forward(conv_shape(n_, c_, h_, w_in_, oc_, k_, stride_, pad_, oh_, ow_, bf16_, f16_), in.data(),
                      store_.device_param(w_), y_.data());
  if (has_bias_) gpu::add_channel_bias(y_.data(), store_.device_param(b_), int(n_), int(oc_), int(p_));
  record_pass(Pass::forward);
  return y_;
}

const Tensor& Conv2d::backward_cuda(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const float* dy = dout.data();
  const gpu::ConvShape s = conv_shape(n_, c_, h_, w_in_, oc_, k_, stride_, pad_, oh_, ow_, bf16_, f16_);
  if (has_bias_) {
    gpu::add_channel_sums(store_.device_grad(b_), dy, int(n_), int(oc_), int(p_));
    sink.ready(b_);
  }
  record_pass(Pass::weights);
  gpu::conv2d_backward_filter(s, x_->data(), dy, store_.device_grad(w_));
  sink.ready(w_);  // final now: announce before the dx pass so communication overlaps it
  if (!need_input_grad) return dx_;
  dx_.resize_like(*x_);
  record_pass(Pass::data);
  gpu::conv2d_backward_data(s, store_.device_param(w_), dy, dx_.data());
  return dx_;
}

}  // namespace dpt
