// Conv2d over NCHW tensors by im2col + one sgemm for the whole batch.
// Terms:
//   P    = OH*OW output pixels per sample, R = N*P output pixels in the batch,
//   CKK  = C*K*K values in one receptive field; row q = (c, ky, kx),
//   col  = the [CKK, R] matrix whose column n*P + p holds the receptive field of
//          pixel p of sample n (zeros where the field hangs over the padding).
//          This layout makes im2col and col2im run along contiguous image rows.
//   Yt   = [OC, R], the output with channels outermost.
// Forward:  Yt = W col (W viewed as [OC, CKK]), then bias and a block copy to NCHW.
// Backward: dYt gathered from NCHW, db += row sums of dYt, dW += dYt col^T,
//           dcol = W^T dYt, then col2im adds dcol back onto the input positions it
//           was copied from.
#pragma once

#include "models/layer.h"

namespace dpt {

class Conv2d : public Layer {
 public:
  Conv2d(ParamStore& store, const std::string& name, int64_t in_channels, int64_t out_channels,
         int64_t kernel, int64_t stride = 1, int64_t padding = 0);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  std::vector<size_t> used_params() const override { return {w_, b_}; }

 private:
  ParamStore& store_;
  int64_t c_, oc_, k_, stride_, pad_;
  size_t w_ = 0, b_ = 0;
  int64_t n_ = 0, h_ = 0, w_in_ = 0, oh_ = 0, ow_ = 0;
  const Tensor* x_ = nullptr;
  Tensor col_, yt_, y_, dyt_, dcol_, dx_;
};

}  // namespace dpt
