#include "models/layers/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/init.h"

namespace dpt {
namespace {

// Sums with 8 independent partial sums: the compiler vectorises them without being
// allowed to reassociate (no -ffast-math), and the result does not depend on it.
inline float sum_of(const float* p, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  float tail = 0;
  for (; i < n; ++i) tail += p[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

inline float squared_deviations(const float* p, int64_t n, float mean) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const float d = p[i + j] - mean;
      acc[j] += d * d;
    }
  float tail = 0;
  for (; i < n; ++i) tail += (p[i] - mean) * (p[i] - mean);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

// sum(g) and sum(g * (x - mean)) over one plane; g = dy, or dy where y > 0 (fused ReLU).
template <bool kRelu>
inline void gradient_sums(const float* dy, const float* x, const float* y, int64_t n, float mean, float& sum_g,
                          float& sum_gx) {
  float a[8] = {}, b[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const float g = kRelu ? (y[i + j] > 0.0f ? dy[i + j] : 0.0f) : dy[i + j];
      a[j] += g;
      b[j] += g * (x[i + j] - mean);
    }
  float ta = 0, tb = 0;
  for (; i < n; ++i) {
    const float g = kRelu ? (y[i] > 0.0f ? dy[i] : 0.0f) : dy[i];
    ta += g;
    tb += g * (x[i] - mean);
  }
  sum_g = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])) + ta;
  sum_gx = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7])) + tb;
}

}  // namespace

BatchNorm::BatchNorm(ParamStore& store, const std::string& name, int64_t channels, bool fuse_relu, float eps,
                     float momentum)
    : Layer(name), store_(store), c_(channels), relu_(fuse_relu), eps_(eps), momentum_(momentum) {
  w_ = store.add(join_name(name, "weight"), {c_});
  b_ = store.add(join_name(name, "bias"), {c_});
  running_mean_ = store.add_buffer(join_name(name, "running_mean"), {c_});
  running_var_ = store.add_buffer(join_name(name, "running_var"), {c_});
  num_batches_ = store.add_buffer(join_name(name, "num_batches_tracked"), {}, /*is_count=*/true);
}

void BatchNorm::init_params(ParamStore& store, uint64_t) {
  init_constant(store.param_span(w_), 1.0f);
  init_constant(store.param_span(b_), 0.0f);
  std::fill_n(store.buffer(running_mean_), c_, 0.0f);
  std::fill_n(store.buffer(running_var_), c_, 1.0f);
  *store.buffer(num_batches_) = 0.0f;
}

void BatchNorm::local_moments(const float* x) {
  const auto C = static_cast<size_t>(c_);
  sum_.assign(C, 0.0);
  m2_.assign(C, 0.0);
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t c = 0; c < c_; ++c) sum_[c] += sum_of(x + (n * c_ + c) * s_, s_);
  const double count = static_cast<double>(n_ * s_);
  mean_.resize(C);
  for (size_t c = 0; c < C; ++c) mean_[c] = static_cast<float>(sum_[c] / count);
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t c = 0; c < c_; ++c) m2_[c] += squared_deviations(x + (n * c_ + c) * s_, s_, mean_[c]);
  count_ = count;
}

void BatchNorm::batch_statistics(BatchStatsReducer* reducer) {
  const auto C = static_cast<size_t>(c_);
  std::vector<double> mean(mean_.begin(), mean_.end());
  if (reducer) {
    const size_t per_rank = 1 + 2 * C;
    moments_.resize(per_rank);
    moments_[0] = static_cast<float>(count_);
    for (size_t c = 0; c < C; ++c) {
      moments_[1 + c] = mean_[c];
      moments_[1 + C + c] = static_cast<float>(m2_[c]);
    }
    reducer->gather_moments(moments_, gathered_);
    if (gathered_.empty() || gathered_.size() % per_rank != 0)
      throw std::logic_error(name() + ": SyncBatchNorm gathered " + std::to_string(gathered_.size()) +
                             " values, not a multiple of the " + std::to_string(per_rank) + " each rank sends");
    // Chan et al.'s pairwise combination, in rank order (the same result on every rank):
    //   n = na + nb, delta = mean_b - mean_a,
    //   mean = mean_a + delta nb / n, m2 = m2_a + m2_b + delta^2 na nb / n.
    double n = 0;
    for (size_t r = 0; r < gathered_.size() / per_rank; ++r) {
      const float* g = gathered_.data() + r * per_rank;
      const double nb = g[0];
      if (nb <= 0) continue;
      const double total = n + nb;
      for (size_t c = 0; c < C; ++c) {
        const double mb = g[1 + c], m2b = g[1 + C + c];
        if (n == 0) {
          mean[c] = mb;
          m2_[c] = m2b;
        } else {
          const double delta = mb - mean[c];
          mean[c] += delta * nb / total;
          m2_[c] += m2b + delta * delta * n * nb / total;
        }
      }
      n = total;
    }
    count_ = n;
  }
  if (count_ <= 1)
    throw std::invalid_argument(name() + ": expected more than 1 value per channel when training, got " +
                                std::to_string(static_cast<int64_t>(count_)) + " (batch of " + std::to_string(n_) +
                                ")");
  float* rm = store_.buffer(running_mean_);
  float* rv = store_.buffer(running_var_);
  invstd_.resize(C);
  for (size_t c = 0; c < C; ++c) {
    const double var = m2_[c] / count_;
    mean_[c] = static_cast<float>(mean[c]);
    invstd_[c] = static_cast<float>(1.0 / std::sqrt(var + eps_));
    const double unbiased = m2_[c] / (count_ - 1);
    rm[c] = static_cast<float>((1.0 - momentum_) * rm[c] + momentum_ * mean[c]);
    rv[c] = static_cast<float>((1.0 - momentum_) * rv[c] + momentum_ * unbiased);
  }
  *store_.buffer(num_batches_) += 1.0f;
}

const Tensor& BatchNorm::forward(const Tensor& in, const ForwardContext& ctx) {
  if (in.rank() < 2 || in.dim(1) != c_)
    throw std::invalid_argument(name() + ": expected [N, " + std::to_string(c_) + ", ...], got " +
                                shape_to_string(in.shape()));
  if (in.on_cuda()) throw std::invalid_argument(name() + ": BatchNorm has no CUDA kernels");
  x_ = &in;
  n_ = in.dim(0);
  s_ = n_ > 0 ? static_cast<int64_t>(in.numel()) / (n_ * c_) : 0;
  training_ = ctx.training;
  reducer_ = training_ ? ctx.batch_stats : nullptr;
  const float* x = in.data();
  if (training_) {
    local_moments(x);
    batch_statistics(reducer_);
  } else {
    const float* rm = store_.buffer(running_mean_);
    const float* rv = store_.buffer(running_var_);
    mean_.assign(rm, rm + c_);
    invstd_.resize(static_cast<size_t>(c_));
    for (int64_t c = 0; c < c_; ++c) invstd_[c] = 1.0f / std::sqrt(rv[c] + eps_);
  }
  y_.resize(in.shape());
  float* y = y_.data();
  const float* w = store_.param(w_);
  const float* b = store_.param(b_);
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t c = 0; c < c_; ++c) {
      const float scale = w[c] * invstd_[c];
      const float shift = b[c] - mean_[c] * scale;
      const float* src = x + (n * c_ + c) * s_;
      float* dst = y + (n * c_ + c) * s_;
      if (relu_)
        for (int64_t i = 0; i < s_; ++i) dst[i] = std::max(src[i] * scale + shift, 0.0f);
      else
        for (int64_t i = 0; i < s_; ++i) dst[i] = src[i] * scale + shift;
    }
  return y_;
}

const Tensor& BatchNorm::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const auto C = static_cast<size_t>(c_);
  const float* dy = dout.data();
  const float* x = x_->data();
  const float* y = y_.data();
  std::vector<double> sum_g(C, 0.0), sum_gx(C, 0.0);
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t c = 0; c < c_; ++c) {
      const int64_t o = (n * c_ + c) * s_;
      float a, b;
      if (relu_) gradient_sums<true>(dy + o, x + o, y + o, s_, mean_[c], a, b);
      else gradient_sums<false>(dy + o, x + o, y + o, s_, mean_[c], a, b);
      sum_g[c] += a;
      sum_gx[c] += b;
    }
  float* dw = store_.grad(w_);
  float* db = store_.grad(b_);
  for (size_t c = 0; c < C; ++c) {
    db[c] += static_cast<float>(sum_g[c]);
    dw[c] += static_cast<float>(sum_gx[c] * invstd_[c]);
  }
  sink.ready(b_);
  sink.ready(w_);
  if (!need_input_grad) return dx_;
  dx_.resize(x_->shape());
  float* dx = dx_.data();
  const float* w = store_.param(w_);
  // dx = k * g + kx * (x - mean) + k0 per channel (training), or k * g (evaluation).
  std::vector<float> k(C), kx(C, 0.0f), k0(C, 0.0f);
  if (training_) {
    grad_sums_.resize(2 * C);
    for (size_t c = 0; c < C; ++c) {
      grad_sums_[c] = static_cast<float>(sum_g[c]);
      grad_sums_[C + c] = static_cast<float>(sum_gx[c] * invstd_[c]);  // sum(g * xhat)
    }
    if (reducer_) reducer_->sum_gradients(grad_sums_);
    for (size_t c = 0; c < C; ++c) {
      const double inv = invstd_[c];
      const double mean_g = grad_sums_[c] / count_;
      const double mean_gxhat = grad_sums_[C + c] / count_;
      const double kk = static_cast<double>(w[c]) * inv;
      k[c] = static_cast<float>(kk);
      kx[c] = static_cast<float>(-kk * inv * mean_gxhat);
      k0[c] = static_cast<float>(-kk * mean_g);
    }
  } else {
    for (size_t c = 0; c < C; ++c) k[c] = w[c] * invstd_[c];
  }
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t c = 0; c < c_; ++c) {
      const int64_t o = (n * c_ + c) * s_;
      const float a = k[c], bx = kx[c], b0 = k0[c], m = mean_[c];
      if (relu_)
        for (int64_t i = 0; i < s_; ++i)
          dx[o + i] = a * (y[o + i] > 0.0f ? dy[o + i] : 0.0f) + bx * (x[o + i] - m) + b0;
      else
        for (int64_t i = 0; i < s_; ++i) dx[o + i] = a * dy[o + i] + bx * (x[o + i] - m) + b0;
    }
  return dx_;
}

}  // namespace dpt
