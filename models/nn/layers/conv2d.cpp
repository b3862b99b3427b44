#include "models/nn/layers/conv2d.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <stdexcept>
#if defined(__x86_64__) && defined(__SSE2__)
#include <immintrin.h>
#endif

#include "models/kernels/cpu/bf16.h"
#include "models/kernels/cpu/gemm.h"
#include "models/nn/init.h"
#include "models/kernels/cpu/parallel_for.h"

namespace dpt {

Conv2d::Conv2d(ParamStore& store, const std::string& name, int64_t in_channels, int64_t out_channels,
               int64_t kernel, int64_t stride, int64_t padding, bool bias, ConvInit init)
    : Layer(name), store_(store), c_(in_channels), oc_(out_channels), k_(kernel), stride_(stride),
      pad_(padding), has_bias_(bias), init_(init) {
  if (in_channels < 1 || out_channels < 1 || kernel < 1 || stride < 1 || padding < 0)
    throw std::invalid_argument(name + ": Conv2d needs positive channels, kernel and stride and padding >= 0");
  w_ = store.add(join_name(name, "weight"), {oc_, c_, k_, k_});
  if (has_bias_) b_ = store.add(join_name(name, "bias"), {oc_});
}

std::vector<size_t> Conv2d::used_params() const {
  if (has_bias_) return {w_, b_};
  return {w_};
}

void Conv2d::init_params(ParamStore& store, uint64_t seed) {
  const auto& infos = store.infos();
  if (init_ == ConvInit::kKaimingNormalFanOut) {
    // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2) / sqrt(OC*K*K).
    init_normal(store.param_span(w_), std::sqrt(2.0f / static_cast<float>(oc_ * k_ * k_)),
                param_seed(seed, infos[w_].name));
    if (has_bias_) init_constant(store.param_span(b_), 0.0f);
    return;
  }
  const float bound = 1.0f / std::sqrt(static_cast<float>(c_ * k_ * k_));
  init_uniform(store.param_span(w_), bound, param_seed(seed, infos[w_].name));
  if (has_bias_) init_uniform(store.param_span(b_), bound, param_seed(seed, infos[b_].name));
}

void Conv2d::check_input(const Tensor& in) {
  if (in.rank() != 4 || in.dim(1) != c_)
    throw std::invalid_argument(name() + ": expected [N, " + std::to_string(c_) + ", H, W], got " +
                                shape_to_string(in.shape()));
  n_ = in.dim(0);
  h_ = in.dim(2), w_in_ = in.dim(3);
  if (h_ + 2 * pad_ < k_ || w_in_ + 2 * pad_ < k_)
    throw std::invalid_argument(name() + ": input " + shape_to_string(in.shape()) + " is smaller than the " +
                                std::to_string(k_) + "x" + std::to_string(k_) + " kernel with padding " +
                                std::to_string(pad_));
  oh_ = (h_ + 2 * pad_ - k_) / stride_ + 1;
  ow_ = (w_in_ + 2 * pad_ - k_) / stride_ + 1;
}

void Conv2d::plan(const Tensor& in) {
  if (in.shape() == planned_) {
    n_ = in.dim(0);
    return;
  }
  check_input(in);
  p_ = oh_ * ow_;
  hp_ = h_ + 2 * pad_;
  wp_ = w_in_ + 2 * pad_;
  // A tap is live when some output pixel reads a real input pixel through it.
  auto live = [&](int64_t k, int64_t out, int64_t in_size) {
    for (int64_t o = 0; o < out; ++o) {
      const int64_t i = o * stride_ - pad_ + k;
      if (i >= 0 && i < in_size) return true;
    }
    return false;
  };
  row_copy_ = stride_ == 1 && ow_ >= kRowCopyMin;
  padded_ = row_copy_ && pad_ > 0;
  taps_.clear();
  offsets_.clear();
  for (int64_t ky = 0; ky < k_; ++ky)
    for (int64_t kx = 0; kx < k_; ++kx) {
      if (!live(ky, oh_, h_) || !live(kx, ow_, w_in_)) continue;
      taps_.push_back({ky, kx});
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox) {
          if (row_copy_) {  // into xp (the input itself when pad is 0)
            offsets_.push_back(static_cast<int32_t>((oy * stride_ + ky) * wp_ + ox * stride_ + kx));
            continue;
          }
          const int64_t iy = oy * stride_ - pad_ + ky, ix = ox * stride_ - pad_ + kx;
          const bool inside = iy >= 0 && iy < h_ && ix >= 0 && ix < w_in_;
          offsets_.push_back(inside ? static_cast<int32_t>(iy * w_in_ + ix) : -1);
        }
    }
  all_taps_ = static_cast<int64_t>(taps_.size()) == k_ * k_;
  rows_ = c_ * static_cast<int64_t>(taps_.size());
  chunk_ = p_ >= kTargetColumns ? 1 : std::min<int64_t>(n_, (kTargetColumns + p_ - 1) / p_);
  chunk_ = std::max<int64_t>(chunk_, 1);
  planned_ = in.shape();
}

void Conv2d::pad_input(const float* x) {
  if (!padded_) {
    xp_data_ = x;
    return;
  }
  xp_.resize({n_, c_, hp_, wp_});
  float* xp = xp_.data();
  parallel_for(n_ * c_, parallel_grain(hp_ * wp_), [&](int64_t first, int64_t last) {
    for (int64_t plane = first; plane < last; ++plane) {
      const float* src = x + plane * h_ * w_in_;
      float* dst = xp + plane * hp_ * wp_;
      std::fill(dst, dst + pad_ * wp_, 0.0f);
      for (int64_t y = 0; y < h_; ++y) {
        float* row = dst + (y + pad_) * wp_;
        std::fill(row, row + pad_, 0.0f);
        std::copy(src + y * w_in_, src + (y + 1) * w_in_, row + pad_);
        std::fill(row + pad_ + w_in_, row + wp_, 0.0f);
      }
      std::fill(dst + (pad_ + h_) * wp_, dst + hp_ * wp_, 0.0f);
    }
  });
  xp_data_ = xp;
}

void Conv2d::im2col(int64_t n0, int64_t nb, float* col, uint16_t* col16) const {
  const int64_t ld = nb * p_, ntaps = static_cast<int64_t>(taps_.size()), plane = padded_ ? hp_ * wp_ : h_ * w_in_;
  const bool rows = row_copy_;
  // Each col row q = (c, tap) is written by one thread; as bf16 through an fp32 row that
  // is converted whole (vector conversion of one long row, not of many short runs).
  parallel_for(c_ * ntaps, parallel_grain(ld), [&](int64_t first, int64_t last) {
    thread_local std::vector<float> scratch;
    if (col16) scratch.resize(static_cast<size_t>(ld));
    for (int64_t q = first; q < last; ++q) {
      const int64_t c = q / ntaps, ti = q % ntaps;
      const int32_t* off = offsets_.data() + ti * p_;
      float* qrow = col16 ? scratch.data() : col + q * ld;
      for (int64_t j = 0; j < nb; ++j) {
        const float* src = xp_data_ + ((n0 + j) * c_ + c) * plane;
        float* dst = qrow + j * p_;
        if (rows) {
          for (int64_t oy = 0; oy < oh_; ++oy) std::copy_n(src + off[oy * ow_], ow_, dst + oy * ow_);
        } else {  // offset -1: a padding pixel (a select, not a branch)
          for (int64_t p = 0; p < p_; ++p) {
            const int32_t o = off[p];
            const float v = src[o < 0 ? 0 : o];
            dst[p] = o < 0 ? 0.0f : v;
          }
        }
      }
      if (col16) to_bf16(qrow, col16 + q * ld, ld);
    }
  });
}

void Conv2d::col2im(int64_t n0, int64_t nb, const float* col, float* dxp) const {
  const int64_t ld = nb * p_, ntaps = static_cast<int64_t>(taps_.size()), plane = padded_ ? hp_ * wp_ : h_ * w_in_;
  const bool rows = row_copy_;
  // The taps of one channel add into the same planes: a channel is one thread's.
  parallel_for(c_, parallel_grain(ntaps * ld), [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c)
      for (int64_t ti = 0; ti < ntaps; ++ti) {
        const int32_t* off = offsets_.data() + ti * p_;
        const float* qrow = col + (c * ntaps + ti) * ld;
        for (int64_t j = 0; j < nb; ++j) {
          float* dst = dxp + ((n0 + j) * c_ + c) * plane;
          const float* src = qrow + j * p_;
          if (rows) {
            for (int64_t oy = 0; oy < oh_; ++oy) {
              float* d = dst + off[oy * ow_];
              const float* s = src + oy * ow_;
              for (int64_t ox = 0; ox < ow_; ++ox) d[ox] += s[ox];
            }
          } else {
            for (int64_t p = 0; p < p_; ++p)
              if (off[p] >= 0) dst[off[p]] += src[p];
          }
        }
      }
  });
}

// dst[0, n) = src[0, n) with non-temporal stores where aligned (SSE2, every x86-64): the
// destination's lines are written whole without being read first.
static void stream_store(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__) && defined(__SSE2__)
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) dst[i] = src[i];
  for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
  _mm_sfence();  // the streamed lines are visible to later loads of any thread
#endif
  for (; i < n; ++i) dst[i] = src[i];
}

bool Conv2d::pick_onednn(bool bf16) {
  const ConvSetting setting = setting_ ? *setting_ : conv_setting();
  if (setting == ConvSetting::im2col) return false;
  if (setting == ConvSetting::automatic &&
      (!onednn_conv_available() || !onednn_conv_shape_wins(c_, k_, stride_, all_taps_, p_, bf16)))
    return false;
  if (!onednn_) onednn_ = std::make_unique<OnednnConv>();
  if (!onednn_->prepare({n_, c_, h_, w_in_, oc_, k_, stride_, pad_, oh_, ow_}, bf16)) return false;
  return setting == ConvSetting::onednn || onednn_conv_impl_is_jit(onednn_->impl());
}

std::string Conv2d::kernel() const { return use_onednn_ ? "onednn " + onednn_->impl() : "im2col"; }

void Conv2d::record_pass(Pass pass) const {
  const int oc = static_cast<int>(oc_), rows = static_cast<int>(rows_), cols = static_cast<int>(n_ * p_);
  switch (pass) {  // Y = Wl col, dWl += dY col^T, dcol = Wl^T dY, over the whole batch
    case Pass::forward: return record_gemm({false, false, oc, cols, rows, rows, cols, cols, false, bf16_, f16_});
    case Pass::weights: return record_gemm({false, true, oc, rows, cols, cols, cols, rows, true, bf16_, f16_});
    case Pass::data: return record_gemm({true, false, rows, cols, oc, rows, cols, cols, false, bf16_, f16_});
  }
}

void Conv2d::add_bias() {
  const float* b = store_.param(b_);
  float* y = y_.data();
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t o = 0; o < oc_; ++o) {
      float* dst = y + (n * oc_ + o) * p_;
      for (int64_t i = 0; i < p_; ++i) dst[i] += b[o];
    }
}

// The live taps' columns of W ([OC, C, K, K]) as [OC, rows], converted by `to`.
template <class Taps, class T, class To>
static void gather_live_taps(const float* w, int64_t oc, int64_t c_in, int64_t k, int64_t rows, const Taps& taps,
                             T* wl, To to) {
  const int64_t kk = k * k, ntaps = static_cast<int64_t>(taps.size());
  parallel_for(oc, parallel_grain(c_in * kk), [&](int64_t first, int64_t last) {
    for (int64_t o = first; o < last; ++o)
      for (int64_t c = 0; c < c_in; ++c)
        for (int64_t ti = 0; ti < ntaps; ++ti)
          wl[o * rows + c * ntaps + ti] = to(w[(o * c_in + c) * kk + taps[ti].ky * k + taps[ti].kx]);
  });
}

const float* Conv2d::live_weights() {
  const float* w = store_.param(w_);
  if (all_taps_) return w;
  wl_.resize({oc_, rows_});
  gather_live_taps(w, oc_, c_, k_, rows_, taps_, wl_.data(), [](float v) { return v; });
  return wl_.data();
}

void Conv2d::live_weights_bf16() {
  const float* w = store_.param(w_);
  w16_.resize(static_cast<size_t>(oc_ * rows_));
  if (!all_taps_) return gather_live_taps(w, oc_, c_, k_, rows_, taps_, w16_.data(), [](float v) { return bf16_bits(v); });
  parallel_for(oc_, parallel_grain(rows_), [&](int64_t first, int64_t last) {
    to_bf16(w + first * rows_, w16_.data() + first * rows_, (last - first) * rows_);
  });
}

const Tensor& Conv2d::forward(const Tensor& in, const ForwardContext& ctx) {
  if (in.on_cuda()) return forward_cuda(in);
  x_ = &in;
  plan(in);
  bf16_ = gemm_precision() == GemmPrecision::bf16 && bf16_gemm_native();
  f16_ = false;  // no fp16 product on the CPU: fp32 on the fp16 emulation's rounded values
  use_onednn_ = pick_onednn(bf16_);
  if (use_onednn_) {
    y_.resize({n_, oc_, oh_, ow_});
    onednn_->forward(in.data(), store_.param(w_), y_.data());
    record_pass(Pass::forward);
    if (has_bias_) add_bias();
    return y_;
  }
  pad_input(in.data());
  const float* w = nullptr;
  // Training: the columns of every chunk kept for backward when they fit the budget.
  keep_cols_ = ctx.training && rows_ * n_ * p_ * (bf16_ ? 2 : 4) <= kept_columns_bytes_;
  const int64_t col_cols = keep_cols_ ? n_ * p_ : chunk_ * p_;
  if (bf16_) {
    live_weights_bf16();
    col16_.resize(static_cast<size_t>(rows_ * col_cols));
  } else {
    w = live_weights();
    col_.resize({rows_, col_cols});
  }
  y_.resize({n_, oc_, oh_, ow_});
  if (chunk_ > 1) yt_.resize({oc_, chunk_ * p_});
  for (int64_t n0 = 0; n0 < n_; n0 += chunk_) {
    const int64_t nb = std::min(chunk_, n_ - n0), cols = nb * p_;
    float* out = nb == 1 ? y_.data() + n0 * oc_ * p_ : yt_.data();
    if (bf16_) {
      im2col(n0, nb, nullptr, col16_at(n0));
      sgemm_bf16_operands(false, false, static_cast<int>(oc_), static_cast<int>(cols), static_cast<int>(rows_), 1.0f,
                          w16_.data(), col16_at(n0), 0.0f, out, static_cast<int>(cols));
    } else {
      im2col(n0, nb, col_at(n0));
      sgemm(false, false, static_cast<int>(oc_), static_cast<int>(cols), static_cast<int>(rows_), 1.0f, w,
            static_cast<int>(rows_), col_at(n0), static_cast<int>(cols), 0.0f, out, static_cast<int>(cols));
    }
    if (nb > 1)
      parallel_for(nb * oc_, parallel_grain(p_), [&](int64_t first, int64_t last) {
        for (int64_t jo = first; jo < last; ++jo) {
          const int64_t j = jo / oc_, o = jo % oc_;
          std::copy_n(out + o * cols + j * p_, p_, y_.data() + ((n0 + j) * oc_ + o) * p_);
        }
      });
  }
  if (has_bias_) add_bias();
  return y_;
}

const float* Conv2d::chunk_dy(const float* dout, int64_t n0, int64_t nb) {
  if (nb == 1) return dout + n0 * oc_ * p_;
  const int64_t cols = nb * p_;
  dyt_.resize({oc_, cols});
  float* dyt = dyt_.data();
  parallel_for(nb * oc_, parallel_grain(p_), [&](int64_t first, int64_t last) {
    for (int64_t jo = first; jo < last; ++jo) {
      const int64_t j = jo / oc_, o = jo % oc_;
      std::copy_n(dout + ((n0 + j) * oc_ + o) * p_, p_, dyt + o * cols + j * p_);
    }
  });
  return dyt;
}

void Conv2d::dy_bf16(const float* dout) {
  dy16_.resize(static_cast<size_t>(n_ * oc_ * p_));
  for (int64_t n0 = 0; n0 < n_; n0 += chunk_) {
    const int64_t nb = std::min(chunk_, n_ - n0), rows = oc_, cols = nb * p_;
    const float* chunk = chunk_dy(dout, n0, nb);  // [OC, nb*P] in fp32, then converted whole
    uint16_t* dst = dy16_.data() + n0 * oc_ * p_;
    parallel_for(rows, parallel_grain(cols), [&](int64_t first, int64_t last) {
      to_bf16(chunk + first * cols, dst + first * cols, (last - first) * cols);
    });
  }
}

const Tensor& Conv2d::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  if (dout.on_cuda()) return backward_cuda(dout, sink, need_input_grad);
  const float* dy = dout.data();
  if (has_bias_) {
    float* db = store_.grad(b_);
    for (int64_t o = 0; o < oc_; ++o) {
      float sum = 0.0f;
      for (int64_t n = 0; n < n_; ++n) {
        const float* src = dy + (n * oc_ + o) * p_;
        for (int64_t i = 0; i < p_; ++i) sum += src[i];
      }
      db[o] += sum;
    }
    sink.ready(b_);
  }
  if (use_onednn_) {
    record_pass(Pass::weights);
    onednn_->backward_weights(dy, store_.grad(w_));
    sink.ready(w_);
    if (!need_input_grad) return dx_;
    dx_.resize_like(*x_);
    record_pass(Pass::data);
    onednn_->backward_data(dy, dx_.data());
    return dx_;
  }
  // dWl, accumulated over the chunks: straight into the gradient when every tap is live
  // (stored, not added, by the first chunk when the gradient is still pending zero).
  const int64_t kk = k_ * k_, ntaps = static_cast<int64_t>(taps_.size());
  bool dw_zero = false;
  float* dwl = nullptr;
  if (all_taps_) {
    dwl = store_.claim_grad(w_, dw_zero);
  } else {
    dwl_.resize({oc_, rows_});
    dwl_.zero();
    dwl = dwl_.data();
  }
  if (bf16_) dy_bf16(dy);
  // The forward's columns when it kept them, else rebuilt a chunk at a time.
  if (!keep_cols_) {
    if (bf16_) col16_.resize(static_cast<size_t>(rows_ * chunk_ * p_));
    else col_.resize({rows_, chunk_ * p_});
  }
  for (int64_t n0 = 0; n0 < n_; n0 += chunk_) {
    const int64_t nb = std::min(chunk_, n_ - n0), cols = nb * p_;
    const float beta = n0 == 0 && dw_zero ? 0.0f : 1.0f;
    if (bf16_) {
      if (!keep_cols_) im2col(n0, nb, nullptr, col16_at(n0));
      sgemm_bf16_operands(false, true, static_cast<int>(oc_), static_cast<int>(rows_), static_cast<int>(cols), 1.0f,
                          dy16_.data() + n0 * oc_ * p_, col16_at(n0), beta, dwl, static_cast<int>(rows_));
      continue;
    }
    if (!keep_cols_) im2col(n0, nb, col_at(n0));
    sgemm(false, true, static_cast<int>(oc_), static_cast<int>(rows_), static_cast<int>(cols), 1.0f,
          chunk_dy(dy, n0, nb), static_cast<int>(cols), col_at(n0), static_cast<int>(cols), beta, dwl,
          static_cast<int>(rows_));
  }
  if (!all_taps_) {  // dW's live taps += dWl; its dead taps get nothing (zeros when pending)
    float* dw = store_.claim_grad(w_, dw_zero);
    parallel_for(oc_, parallel_grain(c_ * kk), [&](int64_t first, int64_t last) {
      thread_local std::vector<float> scratch;
      for (int64_t o = first; o < last; ++o) {
        const float* live = dwl + o * rows_;
        float* row = dw + o * c_ * kk;  // output channel o's [C, K, K]
        if (!dw_zero) {
          for (int64_t c = 0; c < c_; ++c)
            for (int64_t ti = 0; ti < ntaps; ++ti) row[c * kk + taps_[ti].ky * k_ + taps_[ti].kx] += live[c * ntaps + ti];
          continue;
        }
        // Pending: the row is built in cache and streamed out, not read from memory first
        // (most of it is dead taps' zeros; deep layers' rows are 9x their live weights).
        scratch.assign(static_cast<size_t>(c_ * kk), 0.0f);
        for (int64_t c = 0; c < c_; ++c)
          for (int64_t ti = 0; ti < ntaps; ++ti) scratch[c * kk + taps_[ti].ky * k_ + taps_[ti].kx] = live[c * ntaps + ti];
        stream_store(scratch.data(), row, c_ * kk);
      }
    });
  }
  sink.ready(w_);  // final now: announce before the dx products so communication overlaps them
  if (!need_input_grad) return dx_;
  const float* wl = all_taps_ ? store_.param(w_) : wl_.data();
  dx_.resize_like(*x_);
  // col2im adds into a padded dx on the row-copy path (dx itself otherwise); its interior is dx.
  Tensor& dxp = padded_ ? dxp_ : dx_;
  if (padded_) dxp_.resize({n_, c_, hp_, wp_});
  float* dxp_data = dxp.data();
  parallel_for(static_cast<int64_t>(dxp.numel()), 1 << 16,
               [&](int64_t first, int64_t last) { std::fill(dxp_data + first, dxp_data + last, 0.0f); });
  dcol_.resize({rows_, chunk_ * p_});
  for (int64_t n0 = 0; n0 < n_; n0 += chunk_) {
    const int64_t nb = std::min(chunk_, n_ - n0), cols = nb * p_;
    if (bf16_)
      sgemm_bf16_operands(true, false, static_cast<int>(rows_), static_cast<int>(cols), static_cast<int>(oc_), 1.0f,
                          w16_.data(), dy16_.data() + n0 * oc_ * p_, 0.0f, dcol_.data(), static_cast<int>(cols));
    else
      sgemm(true, false, static_cast<int>(rows_), static_cast<int>(cols), static_cast<int>(oc_), 1.0f, wl,
            static_cast<int>(rows_), chunk_dy(dy, n0, nb), static_cast<int>(cols), 0.0f, dcol_.data(),
            static_cast<int>(cols));
    col2im(n0, nb, dcol_.data(), dxp.data());
  }
  if (padded_) {
    const float* src = dxp_.data();
    float* dst = dx_.data();
    parallel_for(n_ * c_, parallel_grain(h_ * w_in_), [&](int64_t first, int64_t last) {
      for (int64_t plane = first; plane < last; ++plane)
        for (int64_t y = 0; y < h_; ++y)
          std::copy_n(src + (plane * hp_ + y + pad_) * wp_ + pad_, w_in_, dst + (plane * h_ + y) * w_in_);
    });
  }
  return dx_;
}

}  // namespace dpt
