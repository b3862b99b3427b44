// Conv2d's oneDNN path (issue 27 item 4): forward_training, backward_data and
// backward_weights convolution primitives, created once per shape and kept, with NCHW
// fp32 tensors and OIHW fp32 weights at the boundary (the rest of the model is unchanged).
//
// Terms:
//   blocked   oneDNN's own layouts (nChw16c, OIhw16i16o, ...; format "any" at creation,
//             so each primitive names the layout its fastest kernel wants). The NCHW/OIHW
//             tensors are reordered into them and back on every call; the forward's
//             reordered input and weights are kept for backward when the backward
//             primitives want the same layout. Measured against plain NCHW primitives
//             (DPT_CONV_LAYOUT=plain, for that comparison only): on the AVX-512/AMX Xeon
//             plain NCHW runs oneDNN's own im2col GEMM ("gemm:jit"), no faster than ours
//             (docs/resnet.md).
//   bf16      bf16 src and weights (forward), diff_dst and weights (backward data), src and
//             diff_dst (backward weights); dst, diff_src and diff_weights fp32, accumulation
//             fp32: as torch.autocast("cpu", dtype=torch.bfloat16) runs a convolution. The
//             fp32 master weights are rounded into the bf16 reorder on every forward.
//   threads   oneDNN's OpenMP team follows blas_threads(), as its GEMMs do
//             (models/kernels/cpu/gemm_engine.h); the primitives are keyed by it.
// Without oneDNN in the build onednn_conv_available() is false and nothing here may be called.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace dpt {

struct ConvGeometry {
  int64_t n, c, h, w, oc, k, stride, pad, oh, ow;
};

bool onednn_conv_available();

class OnednnConv {
 public:
  OnednnConv();
  ~OnednnConv();
  OnednnConv(const OnednnConv&) = delete;
  OnednnConv& operator=(const OnednnConv&) = delete;

  // Makes (or finds) the primitives for g in this precision; false where oneDNN cannot
  // run it (the caller uses im2col then). impl(): the forward's implementation name
  // ("brg:avx512_core_amx", "jit:avx512_core", "gemm:jit", "ref:any").
  bool prepare(const ConvGeometry& g, bool bf16);
  std::string impl() const;
  // y = conv(x, w), NCHW fp32; uses the last prepare()'s primitives.
  void forward(const float* x, const float* w, float* y);
  // dw += dL/dw from the last forward's x and this dy.
  void backward_weights(const float* dy, float* dw);
  // dx = dL/dx from the last forward's w and dy.
  void backward_data(const float* dy, float* dx);

  struct Plan;  // the primitives and reorders of one shape (conv2d_onednn.cpp)
  struct Plans;

 private:
  std::unique_ptr<Plans> plans_;  // by geometry, precision and threads
  Plan* current_ = nullptr;
};

}  // namespace dpt
