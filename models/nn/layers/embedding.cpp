#include "models/nn/layers/embedding.h"

#include "device/runtime.h"
#include "models/kernels/cuda/gpu_ops.h"

#include <stdexcept>

#include "models/kernels/cpu/gemm.h"
#include "models/nn/init.h"

namespace dpt {

Embedding::Embedding(ParamStore& store, const std::string& token_name, int64_t vocab, int64_t dim,
                     const std::string& position_name, int64_t max_positions, float position_std)
    : Layer(token_name), store_(store), vocab_(vocab), d_(dim), max_pos_(max_positions), pos_std_(position_std) {
  tok_ = store.add(join_name(token_name, "weight"), {vocab, dim});
  if (max_pos_ > 0) pos_ = store.add(join_name(position_name, "weight"), {max_positions, dim});
}

void Embedding::init_params(ParamStore& store, uint64_t seed) {
  init_normal(store.param_span(tok_), 0.02f, param_seed(seed, store.infos()[tok_].name));
  if (max_pos_ > 0)
    init_normal(store.param_span(pos_), pos_std_, param_seed(seed, store.infos()[pos_].name));
}

std::vector<size_t> Embedding::used_params() const {
  if (max_pos_ > 0) return {tok_, pos_};
  return {tok_};
}

const Tensor& Embedding::forward(const Tensor&, const ForwardContext& ctx) {
  const ModelInput* in = ctx.input;
  if (!in || !in->tokens || in->sample_shape.size() != 1)
    throw std::invalid_argument(name() + ": needs token input of shape [n, T]");
  n_ = in->n;
  t_ = in->sample_shape[0];
  if (max_pos_ > 0 && t_ > max_pos_)
    throw std::invalid_argument(name() + ": sequence length " + std::to_string(t_) +
                                " exceeds the position table (" + std::to_string(max_pos_) + ")");
  tokens_.assign(in->tokens, in->tokens + n_ * t_);
  for (const int32_t id : tokens_)
    if (id < 0 || id >= vocab_)
      throw std::invalid_argument(name() + ": token id " + std::to_string(id) +
                                  " outside [0, " + std::to_string(vocab_) + ")");
  y_.set_device(ctx.cuda ? TensorDevice::kCuda : TensorDevice::kCpu);
  y_.resize({n_, t_, d_});
  if (ctx.cuda) {
    // The ids travel as 4-byte words in a float array (same size, never read as floats).
    tokens_device_.reserve(tokens_.size());
    device::copy(tokens_device_.data(), tokens_.data(), tokens_.size() * sizeof(int32_t));
    // Backward's grouping, sent with the ids: in training only (an evaluation or a
    // generated token has no backward), a few tens of microseconds of host work for
    // GPT-2's vocabulary and one more copy.
    if (ctx.training) {
      groups_.build(tokens_, vocab_);
      groups_device_.reserve(groups_.words().size());
      device::copy(groups_device_.data(), groups_.words().data(), groups_.words().size() * sizeof(int32_t));
    }
    grouped_ = ctx.training;
    gpu::embedding_forward(reinterpret_cast<const int32_t*>(tokens_device_.data()), store_.device_param(tok_),
                           max_pos_ > 0 ? store_.device_param(pos_) : nullptr, y_.data(),
                           static_cast<int>(n_ * t_), static_cast<int>(t_), static_cast<int>(d_));
    return y_;
  }
  const float* table = store_.param(tok_);
  const float* pos = max_pos_ > 0 ? store_.param(pos_) : nullptr;
  for (int64_t i = 0; i < n_ * t_; ++i) {
    const int32_t id = tokens_[i];
    const float* e = table + static_cast<int64_t>(id) * d_;
    float* y = y_.data() + i * d_;
    if (pos) {
      const float* p = pos + (i % t_) * d_;
      for (int64_t j = 0; j < d_; ++j) y[j] = e[j] + p[j];
    } else {
      for (int64_t j = 0; j < d_; ++j) y[j] = e[j];
    }
  }
  return y_;
}

const Tensor& Embedding::backward(const Tensor& dout, GradSink& sink, bool) {
  // Announce in reverse registration order: position table, then token table.
  if (dout.on_cuda()) {
    if (!grouped_) throw std::logic_error(name() + ": backward on CUDA after a forward that was not in training");
    gpu::embedding_backward(reinterpret_cast<const int32_t*>(groups_device_.data()), groups_.distinct(), dout.data(),
                            store_.device_grad(tok_), max_pos_ > 0 ? store_.device_grad(pos_) : nullptr,
                            static_cast<int>(n_ * t_), static_cast<int>(t_), static_cast<int>(d_));
    if (max_pos_ > 0) sink.ready(pos_);
    sink.ready(tok_);
    return none_;
  }
  if (max_pos_ > 0) {
    float* dpos = store_.grad(pos_);
    for (int64_t i = 0; i < n_ * t_; ++i) {
      const float* g = dout.data() + i * d_;
      float* dp = dpos + (i % t_) * d_;
      for (int64_t j = 0; j < d_; ++j) dp[j] += g[j];
    }
    sink.ready(pos_);
  }
  float* dtable = store_.grad(tok_);
  for (int64_t i = 0; i < n_ * t_; ++i) {
    const float* g = dout.data() + i * d_;
    float* de = dtable + static_cast<int64_t>(tokens_[i]) * d_;
    for (int64_t j = 0; j < d_; ++j) de[j] += g[j];
  }
  sink.ready(tok_);
  return none_;  // token ids have no gradient
}

TiedHead::TiedHead(ParamStore& store, const std::string& name, size_t table, int64_t vocab,
                   int64_t dim)
    : Layer(name), store_(store), table_(table), vocab_(vocab), d_(dim) {}

const Tensor& TiedHead::forward(const Tensor& in, const ForwardContext&) {
  if (in.last_dim() != d_) throw std::invalid_argument(name() + ": bad input width");
  x_ = &in;
  const int rows = static_cast<int>(in.numel() / d_);
  std::vector<int64_t> shape = in.shape();
  shape.back() = vocab_;
  y_.set_device(in.device());
  y_.resize(std::move(shape));
  const bool cuda = in.on_cuda();
  bf16_ = !cuda && gemm_precision() == GemmPrecision::bf16 && bf16_gemm_native();
  if (bf16_) {
    sgemm_bf16_operands(false, true, rows, static_cast<int>(vocab_), static_cast<int>(d_), 1.0f,
                        x16_.convert(in.data(), rows * d_), w16_.convert(store_.param(table_), vocab_ * d_), 0.0f,
                        y_.data(), static_cast<int>(vocab_));
    return y_;
  }
  sgemm_on(cuda, false, true, rows, static_cast<int>(vocab_), static_cast<int>(d_), 1.0f, in.data(),
           static_cast<int>(d_), store_.param_on(cuda, table_), static_cast<int>(d_), 0.0f, y_.data(),
           static_cast<int>(vocab_));
  return y_;
}

const Tensor& TiedHead::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const int rows = static_cast<int>(dout.numel() / vocab_);
  const bool cuda = dout.on_cuda();
  if (bf16_) {  // dW first (stored over a pending gradient: the embedding adds its part later)
    const uint16_t* dy16 = dy16_.convert(dout.data(), int64_t(rows) * vocab_);
    bool dw_zero = false;
    float* dw = store_.claim_grad(table_, dw_zero);
    sgemm_bf16_operands(true, false, static_cast<int>(vocab_), static_cast<int>(d_), rows, 1.0f, dy16, x16_.data(),
                        dw_zero ? 0.0f : 1.0f, dw, static_cast<int>(d_));
    sink.ready(table_);
    if (need_input_grad) {
      dx_.resize_like(*x_);
      sgemm_bf16_operands(false, false, rows, static_cast<int>(d_), static_cast<int>(vocab_), 1.0f, dy16,
                          w16_.data(), 0.0f, dx_.data(), static_cast<int>(d_));
    }
    return dx_;
  }
  bool dw_zero = false;  // a pending host gradient is stored over (models/nn/param_store.h)
  float* dw = cuda ? store_.device_grad(table_) : store_.claim_grad(table_, dw_zero);
  sgemm_on(cuda, true, false, static_cast<int>(vocab_), static_cast<int>(d_), rows, 1.0f, dout.data(),
           static_cast<int>(vocab_), x_->data(), static_cast<int>(d_), dw_zero ? 0.0f : 1.0f, dw,
           static_cast<int>(d_));
  sink.ready(table_);  // not final yet: the embedding adds its part later
  if (need_input_grad) {
    dx_.resize_like(*x_);
    sgemm_on(cuda, false, false, rows, static_cast<int>(d_), static_cast<int>(vocab_), 1.0f, dout.data(),
             static_cast<int>(vocab_), store_.param_on(cuda, table_), static_cast<int>(d_), 0.0f, dx_.data(),
             static_cast<int>(d_));
  }
  return dx_;
}

}  // namespace dpt
