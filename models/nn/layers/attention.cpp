#include "models/nn/layers/attention.h"

#include "models/kernels/cuda/gpu_ops.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <cmath>
#include <stdexcept>

#include "models/kernels/cpu/fast_math.h"

#include "models/kernels/cpu/gemm.h"
#include "models/kernels/cpu/parallel_for.h"

namespace dpt {
namespace {
// Row i of a causal score matrix (t columns) into probabilities: entries 0..i softmaxed,
// the rest zero.
void causal_softmax_row(float* row, int64_t i, int64_t t) {
  float mx = row[0];
  for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j <= i; ++j) {
    row[j] = fast_exp(row[j] - mx);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
  for (int64_t j = i + 1; j < t; ++j) row[j] = 0.0f;
}

// dS = P (dP - <P, dP>) for row i, in place over dP; P is zero above the diagonal, so dS is.
void softmax_backward_row(const float* prow, float* drow, int64_t i, int64_t t) {
  float dot = 0.0f;
  for (int64_t j = 0; j <= i; ++j) dot += prow[j] * drow[j];
  for (int64_t j = 0; j <= i; ++j) drow[j] = prow[j] * (drow[j] - dot);
  for (int64_t j = i + 1; j < t; ++j) drow[j] = 0.0f;
}

CudaAttention attention_from_environment() {
  const char* v = std::getenv("DPT_CUDA_ATTENTION");
  if (!v || !*v || std::string(v) == "fused") return CudaAttention::fused;
  if (std::string(v) == "materialized") return CudaAttention::materialized;
  throw std::invalid_argument(std::string("DPT_CUDA_ATTENTION=") + v + ": expected fused or materialized");
}

std::atomic<int>& attention_choice() {
  static std::atomic<int> choice{static_cast<int>(attention_from_environment())};
  return choice;
}
}  // namespace

void set_cuda_attention(CudaAttention a) { attention_choice() = static_cast<int>(a); }
CudaAttention cuda_attention() { return static_cast<CudaAttention>(attention_choice().load()); }

CausalAttentionCore::CausalAttentionCore(const std::string& name, int64_t dim, int64_t heads, float dropout,
                                         const std::string& dropout_name)
    : Layer(name), d_(dim), h_(heads), hd_(heads > 0 ? dim / heads : 0),
      drop_(dropout_name.empty() ? join_name(name, "dropout") : dropout_name, dropout) {
  if (heads <= 0 || dim % heads != 0)
    throw std::invalid_argument(name + ": d_model " + std::to_string(dim) +
                                " is not divisible by n_head " + std::to_string(heads));
}

const Tensor& CausalAttentionCore::forward(const Tensor& in, const ForwardContext& ctx) {
  if (in.rank() != 3 || in.dim(2) != 3 * d_)
    throw std::invalid_argument(name() + ": expected [B, T, 3d], got " +
                                shape_to_string(in.shape()));
  qkv_ = &in;
  b_ = in.dim(0), t_ = in.dim(1);
  const int T = static_cast<int>(t_), hd = static_cast<int>(hd_), ld = static_cast<int>(3 * d_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  y_.set_device(in.device());
  y_.resize({b_, t_, d_});
  const bool dropping = drop_.begin(ctx);
  // The fused kernels follow the pass's precision: 16-bit operands on tensor cores where
  // the head fits their tiles (64 columns), fp32 otherwise.
  const GemmPrecision precision = gemm_precision();
  math_ = precision == GemmPrecision::bf16  ? gpu::AttentionMath::bf16
          : precision == GemmPrecision::f16 ? gpu::AttentionMath::f16
                                            : gpu::AttentionMath::f32;
  if (!gpu::attention_fused_supports(hd, math_)) math_ = gpu::AttentionMath::f32;
  // Dropout's mask is applied inside the fp32 kernels; the tensor-core ones have none, so
  // a 16-bit pass with dropout takes the materialized path (16-bit products there).
  fused_ = in.on_cuda() && cuda_attention() == CudaAttention::fused && gpu::attention_fused_supports(hd, math_) &&
           (!dropping || math_ == gpu::AttentionMath::f32);
  if (fused_) return forward_fused(in, scale);
  probs_.set_device(in.device());
  probs_.resize({b_, h_, t_, t_});
  if (dropping) {
    dropped_.set_device(in.device());
    dropped_.resize({b_, h_, t_, t_});
  }
  if (in.on_cuda()) return forward_cuda(in, scale);
  // Per sample: every head's scores (one strided batch over the heads: head h's q and k
  // are hd columns after head h-1's, its scores T*T after), then the causal softmax of
  // all H*T rows at once on parallel_for's threads (rows are independent: the bits one
  // thread gives), then every head's mix of V (head h's output in columns h*hd...).
  const int H = static_cast<int>(h_), d = static_cast<int>(d_);
  const int64_t tt = t_ * t_;
  for (int64_t b = 0; b < b_; ++b) {
    const float* qkv_b = in.data() + b * t_ * 3 * d_;
    float* p_b = probs_.data() + b * h_ * tt;
    sgemm_batched_on(false, false, true, T, T, hd, scale, qkv_b, ld, hd, qkv_b + d_, ld, hd, 0.0f, p_b, T, tt, H);
    parallel_for(h_ * t_, parallel_grain(3 * t_), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) causal_softmax_row(p_b + r * t_, r % t_, t_);
    });
    if (drop_.active())
      for (int64_t h = 0; h < h_; ++h) {
        const int64_t slice = (b * h_ + h) * tt;
        dropout_apply(probs_.data() + slice, dropped_.data() + slice, static_cast<size_t>(tt), drop_.p(),
                      drop_.draw_key(), static_cast<uint64_t>(slice));
      }
    sgemm_batched_on(false, false, false, T, hd, T, 1.0f, mixed().data() + b * h_ * tt, T, tt, qkv_b + 2 * d_, ld, hd,
                     0.0f, y_.data() + b * t_ * d_, d, hd, H);
  }
  return y_;
}

const Tensor& CausalAttentionCore::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dqkv_;
  const int T = static_cast<int>(t_), hd = static_cast<int>(hd_), ld = static_cast<int>(3 * d_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  dqkv_.resize_like(*qkv_);
  if (fused_) return backward_fused(dout, scale);
  if (dout.on_cuda()) return backward_cuda(dout, scale);
  // Per sample, as forward: every head's dP and dV (strided batches over the heads),
  // then dS for all H*T rows at once on parallel_for's threads, then every head's dQ and dK.
  const int H = static_cast<int>(h_), d = static_cast<int>(d_);
  const int64_t tt = t_ * t_;
  dp_.resize(static_cast<size_t>(h_ * tt));
  for (int64_t b = 0; b < b_; ++b) {
    const float* qkv_b = qkv_->data() + b * t_ * 3 * d_;
    float* dqkv_b = dqkv_.data() + b * t_ * 3 * d_;
    const float* dy_b = dout.data() + b * t_ * d_;
    // dP = dO V^T, dV = P^T dO
    sgemm_batched_on(false, false, true, T, T, hd, 1.0f, dy_b, d, hd, qkv_b + 2 * d_, ld, hd, 0.0f, dp_.data(), T, tt,
                     H);
    sgemm_batched_on(false, true, false, T, hd, T, 1.0f, mixed().data() + b * h_ * tt, T, tt, dy_b, d, hd, 0.0f,
                     dqkv_b + 2 * d_, ld, hd, H);
    if (drop_.active())  // dP = dropout(dD), the forward's mask
      for (int64_t h = 0; h < h_; ++h) {
        float* dp = dp_.data() + h * tt;
        dropout_apply(dp, dp, static_cast<size_t>(tt), drop_.p(), drop_.draw_key(),
                      static_cast<uint64_t>((b * h_ + h) * tt));
      }
    const float* p_b = probs_.data() + b * h_ * tt;
    parallel_for(h_ * t_, parallel_grain(3 * t_), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) softmax_backward_row(p_b + r * t_, dp_.data() + r * t_, r % t_, t_);
    });
    // dQ = dS K / sqrt(hd), dK = dS^T Q / sqrt(hd)
    sgemm_batched_on(false, false, false, T, hd, T, scale, dp_.data(), T, tt, qkv_b + d_, ld, hd, 0.0f, dqkv_b, ld, hd,
                     H);
    sgemm_batched_on(false, true, false, T, hd, T, scale, dp_.data(), T, tt, qkv_b, ld, hd, 0.0f, dqkv_b + d_, ld, hd,
                     H);
  }
  return dqkv_;
}

// Per head h, the B matrices of the batch are one strided-batched product: the operands
// of batch b are stride (T*3d for q/k/v, T*d for O, H*T*T for P) elements after b-1's.
const Tensor& CausalAttentionCore::forward_cuda(const Tensor& in, float scale) {
  const int B = static_cast<int>(b_), H = static_cast<int>(h_), T = static_cast<int>(t_);
  const int hd = static_cast<int>(hd_), d = static_cast<int>(d_), ld = 3 * d;
  const int64_t s_qkv = int64_t(T) * ld, s_p = int64_t(H) * T * T, s_o = int64_t(T) * d;
  for (int h = 0; h < H; ++h) {
    const float* q = in.data() + h * hd;
    sgemm_batched_on(true, false, true, T, T, hd, scale, q, ld, s_qkv, q + d, ld, s_qkv, 0.0f,
                     probs_.data() + int64_t(h) * T * T, T, s_p, B);
  }
  gpu::causal_softmax_forward(probs_.data(), B * H, T);
  if (drop_.active())
    dropout_apply_on(true, probs_.data(), dropped_.data(), probs_.numel(), drop_.p(), drop_.draw_key());
  for (int h = 0; h < H; ++h)
    sgemm_batched_on(true, false, false, T, hd, T, 1.0f, mixed().data() + int64_t(h) * T * T, T, s_p,
                     in.data() + 2 * d + h * hd, ld, s_qkv, 0.0f, y_.data() + h * hd, d, s_o, B);
  return y_;
}

const Tensor& CausalAttentionCore::backward_cuda(const Tensor& dout, float scale) {
  const int B = static_cast<int>(b_), H = static_cast<int>(h_), T = static_cast<int>(t_);
  const int hd = static_cast<int>(hd_), d = static_cast<int>(d_), ld = 3 * d;
  const int64_t s_qkv = int64_t(T) * ld, s_p = int64_t(H) * T * T, s_o = int64_t(T) * d;
  dp_device_.set_device(TensorDevice::kCuda);
  dp_device_.resize({b_, h_, t_, t_});
  const float* qkv = qkv_->data();
  float* dqkv = dqkv_.data();
  for (int h = 0; h < H; ++h) {
    const float* p = mixed().data() + int64_t(h) * T * T;
    const float* dy = dout.data() + h * hd;
    float* dp = dp_device_.data() + int64_t(h) * T * T;
    // dP = dO V^T, dV = P^T dO
    sgemm_batched_on(true, false, true, T, T, hd, 1.0f, dy, d, s_o, qkv + 2 * d + h * hd, ld, s_qkv, 0.0f, dp, T,
                     s_p, B);
    sgemm_batched_on(true, true, false, T, hd, T, 1.0f, p, T, s_p, dy, d, s_o, 0.0f, dqkv + 2 * d + h * hd, ld,
                     s_qkv, B);
  }
  if (drop_.active())  // dP = dropout(dD), the forward's mask
    dropout_apply_on(true, dp_device_.data(), dp_device_.data(), dp_device_.numel(), drop_.p(), drop_.draw_key());
  gpu::causal_softmax_backward(probs_.data(), dp_device_.data(), B * H, T);
  for (int h = 0; h < H; ++h) {
    const float* ds = dp_device_.data() + int64_t(h) * T * T;
    // dQ = dS K / sqrt(hd), dK = dS^T Q / sqrt(hd)
    sgemm_batched_on(true, false, false, T, hd, T, scale, ds, T, s_p, qkv + d + h * hd, ld, s_qkv, 0.0f,
                     dqkv + h * hd, ld, s_qkv, B);
    sgemm_batched_on(true, true, false, T, hd, T, scale, ds, T, s_p, qkv + h * hd, ld, s_qkv, 0.0f,
                     dqkv + d + h * hd, ld, s_qkv, B);
  }
  return dqkv_;
}

gpu::DropMask CausalAttentionCore::drop_mask() const {
  gpu::DropMask m;
  if (!drop_.active()) return m;
  m.on = true;
  m.threshold = dropout_threshold(drop_.p());
  m.scale = 1.0f / (1.0f - drop_.p());
  m.key = drop_.draw_key();
  return m;
}

// The fused kernels read q, k, v from the packed rows and write O (and dQ, dK, dV) in
// place: only lse (and delta) [B, H, T] besides.
const Tensor& CausalAttentionCore::forward_fused(const Tensor& in, float scale) {
  lse_.set_device(TensorDevice::kCuda);
  lse_.resize({b_, h_, t_});
  gpu::attention_forward(in.data(), y_.data(), lse_.data(), static_cast<int>(b_), static_cast<int>(t_),
                         static_cast<int>(h_), static_cast<int>(hd_), scale, math_, drop_mask());
  return y_;
}

const Tensor& CausalAttentionCore::backward_fused(const Tensor& dout, float scale) {
  delta_.set_device(TensorDevice::kCuda);
  delta_.resize({b_, h_, t_});
  gpu::attention_backward(qkv_->data(), y_.data(), dout.data(), lse_.data(), delta_.data(), dqkv_.data(),
                          static_cast<int>(b_), static_cast<int>(t_), static_cast<int>(h_), static_cast<int>(hd_),
                          scale, math_, drop_mask());
  return dqkv_;
}

CausalSelfAttention::CausalSelfAttention(ParamStore& store, const std::string& name, const GptBlockSpec& spec)
    : Layer(name),
      qkv_(store, join_name(name, spec.qkv()), spec.dim, 3 * spec.dim, true, LinearInit::kGpt2, 0.02f,
           spec.layout()),
      core_(join_name(name, "core"), spec.dim, spec.heads, spec.dropout, join_name(name, "attn_dropout")),
      // GPT-2 scales the init of projections into the residual stream by 1/sqrt(2L).
      proj_(store, join_name(name, spec.attn_proj()), spec.dim, spec.dim, true, LinearInit::kGpt2,
            0.02f / std::sqrt(2.0f * static_cast<float>(spec.n_layer)), spec.layout()),
      resid_drop_(join_name(name, "resid_dropout"), spec.dropout) {}

void CausalSelfAttention::init_params(ParamStore& store, uint64_t seed) {
  qkv_.init_params(store, seed);
  core_.init_params(store, seed);
  proj_.init_params(store, seed);
  resid_drop_.init_params(store, seed);
}

std::vector<size_t> CausalSelfAttention::used_params() const {
  auto p = qkv_.used_params();
  for (size_t i : proj_.used_params()) p.push_back(i);
  return p;
}

const Tensor& CausalSelfAttention::forward(const Tensor& in, const ForwardContext& ctx) {
  const Tensor& qkv = qkv_.forward(in, ctx);
  const Tensor& o = core_.forward(qkv, ctx);
  return resid_drop_.forward(proj_.forward(o, ctx), ctx);
}

const Tensor& CausalSelfAttention::backward(const Tensor& dout, GradSink& sink,
                                            bool need_input_grad) {
  const Tensor& d_proj = resid_drop_.backward(dout, sink, true);
  const Tensor& d_o = proj_.backward(d_proj, sink, true);
  const Tensor& d_qkv = core_.backward(d_o, sink, true);
  return qkv_.backward(d_qkv, sink, need_input_grad);
}

}  // namespace dpt
