#include "models/nn/layers/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/nn/init.h"
#include "models/kernels/cpu/parallel_for.h"

namespace dpt {
namespace {

// The loops run over a sample's C*S values at once (position j = c*S + s, contiguous in
// NCHW), with per-position accumulators and per-position copies of the per-channel
// constants ("expanded" to C*S). Every inner loop is then one long contiguous,
// vectorisable run, whatever S is (S is 1 at ResNet's last stage, where per-channel
// loops would run over a single value). Accumulators sum N values in float; the C*S
// positions are summed per channel in double.

// Copies a per-channel value to the S positions of its channel.
void expand(const float* per_channel, int64_t c, int64_t s, std::vector<float>& out) {
  out.resize(static_cast<size_t>(c * s));
  for (int64_t ch = 0; ch < c; ++ch) std::fill_n(out.data() + ch * s, s, per_channel[ch]);
}

// Sum over each channel's S positions of a per-position array, in double.
void channel_sums(const std::vector<float>& per_position, int64_t c, int64_t s, std::vector<double>& out) {
  out.assign(static_cast<size_t>(c), 0.0);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < s; ++i) out[ch] += per_position[ch * s + i];
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
  const int64_t cs = c_ * s_;
  acc_a_.assign(static_cast<size_t>(cs), 0.0f);
  float* a = acc_a_.data();
  const int64_t grain = parallel_grain(n_);  // threads take ranges of positions
  parallel_for(cs, grain, [&](int64_t first, int64_t last) {
    for (int64_t n = 0; n < n_; ++n) {
      const float* xn = x + n * cs;
      for (int64_t j = first; j < last; ++j) a[j] += xn[j];
    }
  });
  channel_sums(acc_a_, c_, s_, sum_);
  const double count = static_cast<double>(n_ * s_);
  mean_.resize(C);
  for (size_t c = 0; c < C; ++c) mean_[c] = static_cast<float>(sum_[c] / count);
  expand(mean_.data(), c_, s_, mean_e_);
  const float* m = mean_e_.data();
  std::fill(acc_a_.begin(), acc_a_.end(), 0.0f);
  parallel_for(cs, grain, [&](int64_t first, int64_t last) {
    for (int64_t n = 0; n < n_; ++n) {
      const float* xn = x + n * cs;
      for (int64_t j = first; j < last; ++j) {
        const float d = xn[j] - m[j];
        a[j] += d * d;
      }
    }
  });
  channel_sums(acc_a_, c_, s_, m2_);
  count_ = count;
}

void BatchNorm::check_count() const {
  if (count_ <= 1)
    throw std::invalid_argument(name() + ": expected more than 1 value per channel when training, got " +
                                std::to_string(static_cast<int64_t>(count_)) + " (batch of " + std::to_string(n_) +
                                ")");
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
  check_count();
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
  x_ = &in;
  n_ = in.dim(0);
  s_ = n_ > 0 ? static_cast<int64_t>(in.numel()) / (n_ * c_) : 0;
  training_ = ctx.training;
  reducer_ = training_ ? ctx.batch_stats : nullptr;
  if (in.on_cuda()) return forward_cuda(in);
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
  const auto C = static_cast<size_t>(c_);
  std::vector<float>& scale = k_, &shift = k0_;  // per channel, then expanded
  scale.resize(C);
  shift.resize(C);
  for (size_t c = 0; c < C; ++c) {
    scale[c] = w[c] * invstd_[c];
    shift[c] = b[c] - mean_[c] * scale[c];
  }
  expand(scale.data(), c_, s_, k_e_);
  expand(shift.data(), c_, s_, k0_e_);
  const float* sc = k_e_.data();
  const float* sh = k0_e_.data();
  const int64_t cs = c_ * s_;
  parallel_for(cs, parallel_grain(n_), [&](int64_t first, int64_t last) {
    for (int64_t n = 0; n < n_; ++n) {
      const float* src = x + n * cs;
      float* dst = y + n * cs;
      if (relu_)
        for (int64_t j = first; j < last; ++j) dst[j] = std::max(src[j] * sc[j] + sh[j], 0.0f);
      else
        for (int64_t j = first; j < last; ++j) dst[j] = src[j] * sc[j] + sh[j];
    }
  });
  return y_;
}

const Tensor& BatchNorm::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  if (dout.on_cuda()) return backward_cuda(dout, sink, need_input_grad);
  const auto C = static_cast<size_t>(c_);
  const int64_t cs = c_ * s_;
  const float* dy = dout.data();
  const float* x = x_->data();
  const float* y = y_.data();
  expand(mean_.data(), c_, s_, mean_e_);  // the mean normalised with (global under SyncBatchNorm)
  const float* m = mean_e_.data();
  // Per position: sum(g) and sum(g * (x - mean)), g = dy (masked by y > 0 with the ReLU).
  acc_a_.assign(static_cast<size_t>(cs), 0.0f);
  acc_b_.assign(static_cast<size_t>(cs), 0.0f);
  float* a = acc_a_.data();
  float* bb = acc_b_.data();
  parallel_for(cs, parallel_grain(n_), [&](int64_t first, int64_t last) {
    for (int64_t n = 0; n < n_; ++n) {
      const float* g = dy + n * cs;
      const float* xn = x + n * cs;
      const float* yn = y + n * cs;
      if (relu_)
        for (int64_t j = first; j < last; ++j) {
          const float gv = g[j];  // loaded unconditionally, so the select vectorises
          const float gj = yn[j] > 0.0f ? gv : 0.0f;
          a[j] += gj;
          bb[j] += gj * (xn[j] - m[j]);
        }
      else
        for (int64_t j = first; j < last; ++j) {
          a[j] += g[j];
          bb[j] += g[j] * (xn[j] - m[j]);
        }
    }
  });
  std::vector<double> sum_g, sum_gx;
  channel_sums(acc_a_, c_, s_, sum_g);
  channel_sums(acc_b_, c_, s_, sum_gx);
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
  k_.resize(C);
  kx_.assign(C, 0.0f);
  k0_.assign(C, 0.0f);
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
      k_[c] = static_cast<float>(kk);
      kx_[c] = static_cast<float>(-kk * inv * mean_gxhat);
      k0_[c] = static_cast<float>(-kk * mean_g);
    }
  } else {
    for (size_t c = 0; c < C; ++c) k_[c] = w[c] * invstd_[c];
  }
  expand(k_.data(), c_, s_, k_e_);
  expand(kx_.data(), c_, s_, kx_e_);
  expand(k0_.data(), c_, s_, k0_e_);
  const float* ke = k_e_.data();
  const float* kxe = kx_e_.data();
  const float* k0e = k0_e_.data();
  parallel_for(cs, parallel_grain(n_), [&](int64_t first, int64_t last) {
    for (int64_t n = 0; n < n_; ++n) {
      const float* g = dy + n * cs;
      const float* xn = x + n * cs;
      const float* yn = y + n * cs;
      float* d = dx + n * cs;
      if (relu_)
        for (int64_t j = first; j < last; ++j) {
          const float gv = g[j];
          d[j] = ke[j] * (yn[j] > 0.0f ? gv : 0.0f) + kxe[j] * (xn[j] - m[j]) + k0e[j];
        }
      else
        for (int64_t j = first; j < last; ++j) d[j] = ke[j] * g[j] + kxe[j] * (xn[j] - m[j]) + k0e[j];
    }
  });
  return dx_;
}

}  // namespace dpt
