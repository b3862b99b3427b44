#include "models/layers/conv2d.h"

#include <cmath>
#include <stdexcept>

#include "models/gemm.h"
#include "models/init.h"

namespace dpt {

Conv2d::Conv2d(ParamStore& store, const std::string& name, int64_t in_channels,
               int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding)
    : Layer(name), store_(store), c_(in_channels), oc_(out_channels), k_(kernel), stride_(stride),
      pad_(padding) {
  w_ = store.add(join_name(name, "weight"), {oc_, c_, k_, k_});
  b_ = store.add(join_name(name, "bias"), {oc_});
}

void Conv2d::init_params(ParamStore& store, uint64_t seed) {
  float bound = 1.0f / std::sqrt(static_cast<float>(c_ * k_ * k_));
  init_uniform(store.param_span(w_), bound, param_seed(seed, store.infos()[w_].name));
  init_uniform(store.param_span(b_), bound, param_seed(seed, store.infos()[b_].name));
}

namespace {
// Output columns [lo, hi) whose input column ox*stride - pad + kx lies inside [0, w).
void valid_range(int64_t ow, int64_t w, int64_t stride, int64_t pad, int64_t kx, int64_t& lo,
                 int64_t& hi) {
  lo = 0;
  while (lo < ow && lo * stride - pad + kx < 0) ++lo;
  hi = ow;
  while (hi > lo && (hi - 1) * stride - pad + kx >= w) --hi;
}
}  // namespace

const Tensor& Conv2d::forward(const Tensor& in, const ForwardContext&) {
  if (in.rank() != 4 || in.dim(1) != c_)
    throw std::invalid_argument(name() + ": expected [N, " + std::to_string(c_) +
                                ", H, W], got " + shape_to_string(in.shape()));
  x_ = &in;
  n_ = in.dim(0), h_ = in.dim(2), w_in_ = in.dim(3);
  oh_ = (h_ + 2 * pad_ - k_) / stride_ + 1;
  ow_ = (w_in_ + 2 * pad_ - k_) / stride_ + 1;
  const int64_t p = oh_ * ow_, r = n_ * p, ckk = c_ * k_ * k_;
  col_.resize({ckk, r});
  float* col = col_.data();
  const float* x = in.data();
  for (int64_t c = 0; c < c_; ++c)
    for (int64_t ky = 0; ky < k_; ++ky)
      for (int64_t kx = 0; kx < k_; ++kx) {
        int64_t lo, hi;
        valid_range(ow_, w_in_, stride_, pad_, kx, lo, hi);
        float* qrow = col + ((c * k_ + ky) * k_ + kx) * r;
        for (int64_t n = 0; n < n_; ++n) {
          const float* plane = x + (n * c_ + c) * h_ * w_in_;
          for (int64_t oy = 0; oy < oh_; ++oy) {
            float* dst = qrow + n * p + oy * ow_;
            const int64_t iy = oy * stride_ - pad_ + ky;
            if (iy < 0 || iy >= h_) {
              for (int64_t ox = 0; ox < ow_; ++ox) dst[ox] = 0.0f;
              continue;
            }
            const float* src = plane + iy * w_in_ - pad_ + kx;
            for (int64_t ox = 0; ox < lo; ++ox) dst[ox] = 0.0f;
            if (stride_ == 1) {
              for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox];
            } else {
              for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * stride_];
            }
            for (int64_t ox = hi; ox < ow_; ++ox) dst[ox] = 0.0f;
          }
        }
      }
  yt_.resize({oc_, r});
  sgemm(false, false, static_cast<int>(oc_), static_cast<int>(r), static_cast<int>(ckk), 1.0f,
        store_.param(w_), static_cast<int>(ckk), col, static_cast<int>(r), 0.0f, yt_.data(),
        static_cast<int>(r));
  y_.resize({n_, oc_, oh_, ow_});
  const float* b = store_.param(b_);
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t o = 0; o < oc_; ++o) {
      float* dst = y_.data() + (n * oc_ + o) * p;
      const float* src = yt_.data() + o * r + n * p;
      const float bias = b[o];
      for (int64_t i = 0; i < p; ++i) dst[i] = src[i] + bias;
    }
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const int64_t p = oh_ * ow_, r = n_ * p, ckk = c_ * k_ * k_;
  dyt_.resize({oc_, r});
  float* db = store_.grad(b_);
  for (int64_t o = 0; o < oc_; ++o) {
    float sum = 0.0f;
    for (int64_t n = 0; n < n_; ++n) {
      const float* src = dout.data() + (n * oc_ + o) * p;
      float* dst = dyt_.data() + o * r + n * p;
      for (int64_t i = 0; i < p; ++i) {
        dst[i] = src[i];
        sum += src[i];
      }
    }
    db[o] += sum;
  }
  sink.ready(b_);
  sgemm(false, true, static_cast<int>(oc_), static_cast<int>(ckk), static_cast<int>(r), 1.0f,
        dyt_.data(), static_cast<int>(r), col_.data(), static_cast<int>(r), 1.0f, store_.grad(w_),
        static_cast<int>(ckk));
  sink.ready(w_);
  if (!need_input_grad) return dx_;
  dcol_.resize({ckk, r});
  sgemm(true, false, static_cast<int>(ckk), static_cast<int>(r), static_cast<int>(oc_), 1.0f,
        store_.param(w_), static_cast<int>(ckk), dyt_.data(), static_cast<int>(r), 0.0f,
        dcol_.data(), static_cast<int>(r));
  dx_.resize_like(*x_);
  dx_.zero();
  float* dx = dx_.data();
  for (int64_t c = 0; c < c_; ++c)
    for (int64_t ky = 0; ky < k_; ++ky)
      for (int64_t kx = 0; kx < k_; ++kx) {
        int64_t lo, hi;
        valid_range(ow_, w_in_, stride_, pad_, kx, lo, hi);
        const float* qrow = dcol_.data() + ((c * k_ + ky) * k_ + kx) * r;
        for (int64_t n = 0; n < n_; ++n) {
          float* plane = dx + (n * c_ + c) * h_ * w_in_;
          for (int64_t oy = 0; oy < oh_; ++oy) {
            const int64_t iy = oy * stride_ - pad_ + ky;
            if (iy < 0 || iy >= h_) continue;
            const float* src = qrow + n * p + oy * ow_;
            float* dst = plane + iy * w_in_ - pad_ + kx;
            if (stride_ == 1) {
              for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += src[ox];
            } else {
              for (int64_t ox = lo; ox < hi; ++ox) dst[ox * stride_] += src[ox];
            }
          }
        }
      }
  return dx_;
}

}  // namespace dpt
