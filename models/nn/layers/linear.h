// Linear: y = x W^T + b over the last dimension (PyTorch layout, W is [out, in]).
// Any leading dimensions are flattened into rows: x [rows, in] -> y [rows, out].
// Backward: dW += dy^T x, db += column sums of dy, dx = dy W (three sgemm calls).
// WeightLayout::kInOut stores W transposed, [in, out], as Hugging Face's Conv1D (GPT-2)
// does: y = x W + b, dW += x^T dy, dx = dy W^T. Only the sgemm transposes differ.
// bf16 (GemmPrecision::bf16 on a native CPU): x and W converted once in forward and kept,
// dy once in backward; the three products take the copies (models/kernels/cpu/gemm.h,
// sgemm_bf16_operands) instead of converting their operands each.
#pragma once

#include "models/kernels/cpu/bf16.h"
#include "models/nn/layer.h"

namespace dpt {

enum class LinearInit { kPyTorchDefault, kGpt2 };
enum class WeightLayout { kOutIn, kInOut };

class Linear : public Layer {
 public:
  Linear(ParamStore& store, const std::string& name, int64_t in, int64_t out, bool bias = true,
         LinearInit init = LinearInit::kPyTorchDefault, float gpt2_std = 0.02f,
         WeightLayout layout = WeightLayout::kOutIn);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }
  std::vector<size_t> used_params() const override;
  bool backward_reads_output() const override { return false; }  // x and the weights only

 private:
  ParamStore& store_;
  int64_t in_, out_;
  bool has_bias_;
  LinearInit init_;
  float gpt2_std_;
  bool in_out_;  // WeightLayout::kInOut
  size_t w_ = 0, b_ = 0;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
  bool bf16_ = false;  // of the last forward
  Bf16Copy x16_, w16_, dy16_;
};

}  // namespace dpt
