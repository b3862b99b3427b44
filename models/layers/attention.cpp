#include "models/layers/attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/fast_math.h"

#include "models/gemm.h"

namespace dpt {

CausalAttentionCore::CausalAttentionCore(const std::string& name, int64_t dim, int64_t heads)
    : Layer(name), d_(dim), h_(heads), hd_(dim / heads) {
  if (heads <= 0 || dim % heads != 0)
    throw std::invalid_argument(name + ": d_model " + std::to_string(dim) +
                                " is not divisible by n_head " + std::to_string(heads));
}

const Tensor& CausalAttentionCore::forward(const Tensor& in, const ForwardContext&) {
  if (in.rank() != 3 || in.dim(2) != 3 * d_)
    throw std::invalid_argument(name() + ": expected [B, T, 3d], got " +
                                shape_to_string(in.shape()));
  qkv_ = &in;
  b_ = in.dim(0), t_ = in.dim(1);
  const int T = static_cast<int>(t_), hd = static_cast<int>(hd_), ld = static_cast<int>(3 * d_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  probs_.resize({b_, h_, t_, t_});
  y_.resize({b_, t_, d_});
  for (int64_t b = 0; b < b_; ++b)
    for (int64_t h = 0; h < h_; ++h) {
      const float* q = in.data() + b * t_ * 3 * d_ + h * hd_;
      const float* k = q + d_;
      const float* v = q + 2 * d_;
      float* p = probs_.data() + (b * h_ + h) * t_ * t_;
      sgemm(false, true, T, T, hd, scale, q, ld, k, ld, 0.0f, p, T);
      for (int64_t i = 0; i < t_; ++i) {
        float* row = p + i * t_;
        float mx = row[0];
        for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
        float sum = 0.0f;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = fast_exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (int64_t j = i + 1; j < t_; ++j) row[j] = 0.0f;
      }
      sgemm(false, false, T, hd, T, 1.0f, p, T, v, ld, 0.0f, y_.data() + b * t_ * d_ + h * hd_,
            static_cast<int>(d_));
    }
  return y_;
}

const Tensor& CausalAttentionCore::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dqkv_;
  const int T = static_cast<int>(t_), hd = static_cast<int>(hd_), ld = static_cast<int>(3 * d_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  dqkv_.resize_like(*qkv_);
  dp_.resize(static_cast<size_t>(t_ * t_));
  for (int64_t b = 0; b < b_; ++b)
    for (int64_t h = 0; h < h_; ++h) {
      const float* q = qkv_->data() + b * t_ * 3 * d_ + h * hd_;
      const float* k = q + d_;
      const float* v = q + 2 * d_;
      float* dq = dqkv_.data() + b * t_ * 3 * d_ + h * hd_;
      float* dk = dq + d_;
      float* dv = dq + 2 * d_;
      const float* p = probs_.data() + (b * h_ + h) * t_ * t_;
      const float* dy = dout.data() + b * t_ * d_ + h * hd_;
      float* dp = dp_.data();
      sgemm(false, true, T, T, hd, 1.0f, dy, static_cast<int>(d_), v, ld, 0.0f, dp, T);
      sgemm(true, false, T, hd, T, 1.0f, p, T, dy, static_cast<int>(d_), 0.0f, dv, ld);
      // dS overwrites dP in place; P is zero above the diagonal so dS is too.
      for (int64_t i = 0; i < t_; ++i) {
        const float* prow = p + i * t_;
        float* drow = dp + i * t_;
        float dot = 0.0f;
        for (int64_t j = 0; j <= i; ++j) dot += prow[j] * drow[j];
        for (int64_t j = 0; j <= i; ++j) drow[j] = prow[j] * (drow[j] - dot);
        for (int64_t j = i + 1; j < t_; ++j) drow[j] = 0.0f;
      }
      sgemm(false, false, T, hd, T, scale, dp, T, k, ld, 0.0f, dq, ld);
      sgemm(true, false, T, hd, T, scale, dp, T, q, ld, 0.0f, dk, ld);
    }
  return dqkv_;
}

CausalSelfAttention::CausalSelfAttention(ParamStore& store, const std::string& name, int64_t dim,
                                         int64_t heads, int64_t n_layer)
    : Layer(name),
      qkv_(store, join_name(name, "qkv"), dim, 3 * dim, true, LinearInit::kGpt2),
      core_(join_name(name, "core"), dim, heads),
      // GPT-2 scales the init of projections into the residual stream by 1/sqrt(2L).
      proj_(store, join_name(name, "proj"), dim, dim, true, LinearInit::kGpt2,
            0.02f / std::sqrt(2.0f * static_cast<float>(n_layer))) {}

void CausalSelfAttention::init_params(ParamStore& store, uint64_t seed) {
  qkv_.init_params(store, seed);
  proj_.init_params(store, seed);
}

std::vector<size_t> CausalSelfAttention::used_params() const {
  auto p = qkv_.used_params();
  for (size_t i : proj_.used_params()) p.push_back(i);
  return p;
}

const Tensor& CausalSelfAttention::forward(const Tensor& in, const ForwardContext& ctx) {
  const Tensor& qkv = qkv_.forward(in, ctx);
  const Tensor& o = core_.forward(qkv, ctx);
  return proj_.forward(o, ctx);
}

const Tensor& CausalSelfAttention::backward(const Tensor& dout, GradSink& sink,
                                            bool need_input_grad) {
  const Tensor& d_o = proj_.backward(dout, sink, true);
  const Tensor& d_qkv = core_.backward(d_o, sink, true);
  return qkv_.backward(d_qkv, sink, need_input_grad);
}

}  // namespace dpt
