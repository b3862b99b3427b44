#include "models/nn/layers/linear.h"

#include <cmath>
#include <stdexcept>

#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cpu/gemm.h"
#include "models/nn/init.h"

namespace dpt {

Linear::Linear(ParamStore& store, const std::string& name, int64_t in, int64_t out, bool bias,
               LinearInit init, float gpt2_std, WeightLayout layout)
    : Layer(name), store_(store), in_(in), out_(out), has_bias_(bias), init_(init),
      gpt2_std_(gpt2_std), in_out_(layout == WeightLayout::kInOut) {
  w_ = store.add(join_name(name, "weight"), in_out_ ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in});
  if (has_bias_) b_ = store.add(join_name(name, "bias"), {out});
}

void Linear::init_params(ParamStore& store, uint64_t seed) {
  const auto& infos = store.infos();
  if (init_ == LinearInit::kPyTorchDefault) {
    float bound = 1.0f / std::sqrt(static_cast<float>(in_));
    init_uniform(store.param_span(w_), bound, param_seed(seed, infos[w_].name));
    if (has_bias_) init_uniform(store.param_span(b_), bound, param_seed(seed, infos[b_].name));
  } else {
    init_normal(store.param_span(w_), gpt2_std_, param_seed(seed, infos[w_].name));
    if (has_bias_) init_constant(store.param_span(b_), 0.0f);
  }
}

std::vector<size_t> Linear::used_params() const {
  if (has_bias_) return {w_, b_};
  return {w_};
}

const Tensor& Linear::forward(const Tensor& in, const ForwardContext&) {
  if (in.last_dim() != in_)
    throw std::invalid_argument(name() + ": input " + shape_to_string(in.shape()) +
                                " does not end in " + std::to_string(in_));
  x_ = &in;
  const int rows = static_cast<int>(in.numel() / in_);
  std::vector<int64_t> shape = in.shape();
  shape.back() = out_;
  y_.set_device(in.device());
  y_.resize(std::move(shape));
  const bool cuda = in.on_cuda();
  float* y = y_.data();
  if (has_bias_) {
    const float* b = store_.param_on(cuda, b_);
    if (cuda) {
      gpu::fill_rows(y, b, rows, static_cast<int>(out_));
    } else {
      for (int r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out_; ++o) y[r * out_ + o] = b[o];
    }
  }
  // W [out, in]: y = x W^T (ldb in); W [in, out]: y = x W (ldb out).
  bf16_ = !cuda && gemm_precision() == GemmPrecision::bf16 && bf16_gemm_native();
  if (bf16_) {
    sgemm_bf16_operands(false, !in_out_, rows, static_cast<int>(out_), static_cast<int>(in_), 1.0f,
                        x16_.convert(in.data(), rows * in_), w16_.convert(store_.param(w_), in_ * out_),
                        has_bias_ ? 1.0f : 0.0f, y, static_cast<int>(out_));
    return y_;
  }
  sgemm_on(cuda, false, !in_out_, rows, static_cast<int>(out_), static_cast<int>(in_), 1.0f, in.data(),
           static_cast<int>(in_), store_.param_on(cuda, w_), static_cast<int>(in_out_ ? out_ : in_),
           has_bias_ ? 1.0f : 0.0f, y, static_cast<int>(out_));
  return y_;
}

const Tensor& Linear::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const int rows = static_cast<int>(dout.numel() / out_);
  const bool cuda = dout.on_cuda();
  const float* dy = dout.data();
  // Order: bias, then weight, so announcements run in reverse registration order.
  if (has_bias_) {
    float* db = store_.grad_on(cuda, b_);
    if (cuda) {
      gpu::add_column_sums(db, dy, rows, static_cast<int>(out_));
    } else {
      for (int r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out_; ++o) db[o] += dy[r * out_ + o];
    }
    sink.ready(b_);
  }
  // Stored, not added, over a host gradient still pending zero (models/nn/param_store.h).
  bool dw_zero = false;
  float* dw = cuda ? store_.device_grad(w_) : store_.claim_grad(w_, dw_zero);
  const float beta = dw_zero ? 0.0f : 1.0f;
  if (bf16_) {  // the forward's x and W copies; dy converted once for both products
    const uint16_t* dy16 = dy16_.convert(dy, int64_t(rows) * out_);
    if (in_out_)
      sgemm_bf16_operands(true, false, static_cast<int>(in_), static_cast<int>(out_), rows, 1.0f, x16_.data(), dy16,
                          beta, dw, static_cast<int>(out_));
    else
      sgemm_bf16_operands(true, false, static_cast<int>(out_), static_cast<int>(in_), rows, 1.0f, dy16, x16_.data(),
                          beta, dw, static_cast<int>(in_));
    sink.ready(w_);
    if (need_input_grad) {
      dx_.resize_like(*x_);
      sgemm_bf16_operands(false, in_out_, rows, static_cast<int>(in_), static_cast<int>(out_), 1.0f, dy16,
                          w16_.data(), 0.0f, dx_.data(), static_cast<int>(in_));
    }
    return dx_;
  }
  if (in_out_)  // dW [in, out] += x^T dy
    sgemm_on(cuda, true, false, static_cast<int>(in_), static_cast<int>(out_), rows, 1.0f, x_->data(),
             static_cast<int>(in_), dy, static_cast<int>(out_), beta, dw, static_cast<int>(out_));
  else  // dW [out, in] += dy^T x
    sgemm_on(cuda, true, false, static_cast<int>(out_), static_cast<int>(in_), rows, 1.0f, dy,
             static_cast<int>(out_), x_->data(), static_cast<int>(in_), beta, dw, static_cast<int>(in_));
  sink.ready(w_);  // final now: announce before the dx product so communication overlaps it
  if (need_input_grad) {
    dx_.resize_like(*x_);
    // dx = dy W ([out, in], ldb in) or dy W^T ([in, out], ldb out)
    sgemm_on(cuda, false, in_out_, rows, static_cast<int>(in_), static_cast<int>(out_), 1.0f, dy,
             static_cast<int>(out_), store_.param_on(cuda, w_), static_cast<int>(in_out_ ? out_ : in_), 0.0f,
             dx_.data(), static_cast<int>(in_));
  }
  return dx_;
}

}  // namespace dpt
