// Conv2d over NCHW tensors by im2col + sgemm, in chunks of samples.
// Terms:
//   P      = OH*OW output pixels per sample.
//   tap    one kernel offset (ky, kx). A tap is *live* when at least one output pixel
//          reads a real input pixel through it; a dead tap only ever reads padding
//          (a 3x3 kernel with padding 1 on a 1x1 image has 1 live tap of 9). Dead taps
//          are left out of the products: their weights multiply zeros.
//   rows   = C * live taps; row q = (c, tap), c outermost.
//   chunk  a run of consecutive samples processed together; its columns are
//          (sample j of the chunk, pixel p) -> j*P + p.
//   row copy  stride 1 and output rows of at least kRowCopyMin pixels: an output row
//          reads a contiguous run of input, copied (and added back) a row at a time.
//   xp     on the row-copy path, the input with its zero padding made real ([N, C,
//          H+2pad, W+2pad]; the input itself when pad = 0), so every run is in bounds.
//   offsets  per live tap, the offset each output pixel reads: in an xp plane on the
//          row-copy path; else in an input plane, -1 for a padding pixel (im2col writes
//          0 there, col2im skips it), so no padded copy of the input or of dx is made.
//   col    the [rows, chunk*P] matrix of receptive fields. im2col gathers it through
//          the offsets (whole rows at a time where stride 1 makes them contiguous);
//          col2im adds dcol back through the same offsets (into a padded dx on the
//          row-copy path).
//   Wl     the weights of the live taps, [OC, rows] (the weight tensor itself when
//          every tap is live; else gathered per forward and scattered back in backward).
// Forward, per chunk:  Y = Wl col ([OC, chunk*P]); a chunk of one sample writes
//                      straight into the NCHW output, a larger one is copied there.
// Backward, per chunk: dWl += dY col^T (col rebuilt from the input, not kept from
//                      forward), then dcol = Wl^T dY and col2im adds dcol back onto the
//                      input positions it was copied from.
// Columns kept: in training, forward keeps every chunk's columns (chunk after chunk, the
// block of samples n0.. at rows*n0*P) for backward when they take at most
// kKeptColumnsBytes, instead of backward gathering them again.
// Chunks: one sample when P is large enough for a good GEMM on its own; else enough
// samples for about kTargetColumns columns, so the col buffer stays small (cache) while
// the products stay wide.
// bf16 (GemmPrecision::bf16): the same products with bf16 operands, each converted once:
// Wl gathered or converted into bf16 once per forward (and used again by backward's
// dcol = Wl^T dY), col gathered straight into bf16, dY converted once per backward for
// both of its products (models/kernels/cpu/gemm.h, sgemm_bf16_operands).
// oneDNN: where models/kernels/cpu/conv_engine.h's rule (DPT_CONV) picks it for the input shape
// and the GEMM precision of the forward, oneDNN's convolution primitives
// (models/kernels/cpu/conv2d_onednn.h) run forward and backward instead, bf16 when the
// precision is bf16 on a native CPU; the products are recorded (models/kernels/cpu/gemm.h) as the
// im2col GEMMs they replace, so FLOP counts stay the same.
// CUDA (conv2d_cuda.cpp): cuDNN's forward, backward-data and backward-filter in fp32
// (gpu_ops.h conv2d_*), the bias by two small kernels; recorded as the full-tap im2col
// GEMMs.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "models/nn/layer.h"
#include "models/kernels/cpu/conv2d_onednn.h"
#include "models/kernels/cpu/conv_engine.h"

namespace dpt {

enum class ConvInit {
  kPyTorchDefault,      // weight and bias U(-1/sqrt(fan_in), +): nn.Conv2d's reset_parameters
  kKaimingNormalFanOut  // weight N(0, 2 / (OC*K*K)): torchvision ResNet's convolutions
};

class Conv2d : public Layer {
 public:
  Conv2d(ParamStore& store, const std::string& name, int64_t in_channels, int64_t out_channels,
         int64_t kernel, int64_t stride = 1, int64_t padding = 0, bool bias = true,
         ConvInit init = ConvInit::kPyTorchDefault);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  std::vector<size_t> used_params() const override;
  bool supports_cuda() const override { return true; }
  // What the last forward ran: "im2col", or "onednn <forward / backward data / backward
  // weights implementations>" (benchmarks and tests print it).
  std::string kernel() const;
  // Overrides DPT_CONV for this layer (tests and benchmarks that compare the kernels in
  // one process without changing its environment).
  void set_conv_setting(ConvSetting s) { setting_ = s; }
  // Overrides kKeptColumnsBytes (tests: 0 makes backward gather its columns again).
  void set_kept_columns_bytes(int64_t bytes) { kept_columns_bytes_ = bytes; }

  static constexpr int64_t kTargetColumns = 512;
  static constexpr int64_t kKeptColumnsBytes = int64_t{64} << 20;
  static constexpr int64_t kRowCopyMin = 8;

 private:
  struct Tap {
    int64_t ky, kx;
  };
  void plan(const Tensor& in);
  void pad_input(const float* x);
  // The chunk's columns into col, or as bf16 into col16 when that is given.
  void im2col(int64_t n0, int64_t nb, float* col, uint16_t* col16 = nullptr) const;
  void col2im(int64_t n0, int64_t nb, const float* col, float* dxp) const;
  // dY of a chunk as [OC, nb*P]: the gradient tensor itself for one sample, else gathered.
  const float* chunk_dy(const float* dout, int64_t n0, int64_t nb);
  // Chunk n0's columns: the kept block, or the one chunk's buffer.
  float* col_at(int64_t n0) { return col_.data() + (keep_cols_ ? rows_ * n0 * p_ : 0); }
  uint16_t* col16_at(int64_t n0) { return col16_.data() + (keep_cols_ ? rows_ * n0 * p_ : 0); }
  // Every chunk's dY as bf16, chunk after chunk ([OC, nb*P] each, at n0*OC*P) into dy16_.
  void dy_bf16(const float* dout);
  // Wl: the weight tensor itself when every tap is live, else gathered into wl_; as bf16
  // into w16_ (gathered straight from W) when bf16_.
  const float* live_weights();
  void live_weights_bf16();
  // Whether this forward (and its backward) runs on oneDNN; prepares its primitives.
  bool pick_onednn(bool bf16);
  // Records the im2col GEMM a oneDNN pass stands for (models/kernels/cpu/gemm.h's FLOP counts).
  enum class Pass { forward, weights, data };
  void record_pass(Pass pass) const;
  void add_bias();
  const Tensor& forward_cuda(const Tensor& in);
  const Tensor& backward_cuda(const Tensor& dout, GradSink& sink, bool need_input_grad);
  // The output shape of the input (oh_, ow_; n_), checked as plan() checks it.
  void check_input(const Tensor& in);

  ParamStore& store_;
  int64_t c_, oc_, k_, stride_, pad_;
  bool has_bias_;
  ConvInit init_;
  size_t w_ = 0, b_ = 0;
  int64_t n_ = 0, h_ = 0, w_in_ = 0, oh_ = 0, ow_ = 0, p_ = 0, hp_ = 0, wp_ = 0;
  int64_t chunk_ = 1, rows_ = 0;
  std::vector<Tap> taps_;          // live taps, in (ky, kx) order
  std::vector<int32_t> offsets_;   // [live taps][P]
  std::vector<int64_t> planned_;   // the input shape the plan was made for
  bool all_taps_ = true;
  bool row_copy_ = false, padded_ = false;  // the row-copy path; xp_ (and dxp_) made
  bool keep_cols_ = false;  // of the last forward
  int64_t kept_columns_bytes_ = kKeptColumnsBytes;
  const Tensor* x_ = nullptr;
  const float* xp_data_ = nullptr;  // xp_ when padded_, else the input
  Tensor xp_, col_, yt_, dyt_, dcol_, wl_, dwl_, y_, dxp_, dx_;
  std::vector<uint16_t> w16_, col16_, dy16_;  // bf16 operands (bf16_ on the im2col path)
  std::unique_ptr<OnednnConv> onednn_;
  bool use_onednn_ = false, bf16_ = false;  // of the last forward
  bool f16_ = false;  // the last forward's products took fp16 operands (cuDNN on CUDA)
  std::optional<ConvSetting> setting_;
};

}  // namespace dpt
