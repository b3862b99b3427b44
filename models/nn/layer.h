// Layer: one step of a model's computation with an explicit forward and backward.
//
// Terms:
//   input/output  activations; a layer owns its output tensor and its input-gradient
//                 tensor (resized, not reallocated, each step) and keeps a pointer to
//                 the input it was given, which must stay alive until backward.
//   used params   indices (into the model's ParamStore) of the parameters the layer
//                 reads. A parameter may be used by several layers (GPT's tied token
//                 embedding is read by the embedding and by the output head).
//   GradSink      where a layer reports, during backward, that it has finished
//                 accumulating into one of its parameters' gradients. The sink fires
//                 the model's on_grad_ready callback when the LAST user of that
//                 parameter reports, i.e. the moment the gradient is final.
//
// Gradients always accumulate (+=) so micro-batches add up until zero_grad().
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/nn/batch_stats_reducer.h"
#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cpu/f16_round.h"
#include "models/nn/param_store.h"
#include "models/nn/tensor.h"

namespace dpt {

// What the model is fed: float inputs (images, features) or token ids.
struct ModelInput {
  const float* x = nullptr;          // [n, sample_shape...], when the model takes floats
  const int32_t* tokens = nullptr;   // [n, seq_len], when the model takes tokens
  int64_t n = 0;                     // samples in the batch
  std::vector<int64_t> sample_shape; // shape of one sample (floats or tokens)
};

struct ForwardContext {
  const ModelInput* input = nullptr;
  bool training = true;
  bool cuda = false;  // the model runs on the CUDA device (layers that read `input` follow it)
  // Dropout's draw (models/nn/layers/dropout.h): which training forward this is, and a
  // stream number that makes otherwise equal runs draw different masks (e.g. the rank).
  uint64_t rng_step = 0;
  uint64_t rng_stream = 0;
  // SyncBatchNorm: where BatchNorm layers get the global batch's statistics in training
  // (null: this process's batch). Module::set_batch_stats_reducer sets it.
  BatchStatsReducer* batch_stats = nullptr;
  // kF16: composite layers round their inner activations (and, in backward, their inner
  // gradients) to fp16 as Module does at every layer boundary.
  ComputePrecision precision = ComputePrecision::kF32;
};

class GradSink {
 public:
  using Callback = std::function<void(size_t param_index)>;
  // use_counts[i] = how many layers call ready(i) in one backward pass.
  void begin(const std::vector<int>& use_counts, Callback on_final);
  // Called by a layer after its last write to grad(i) in this backward pass.
  void ready(size_t param_index);
  // True when every parameter's gradient was announced exactly as often as expected.
  bool all_final() const;

 private:
  std::vector<int> pending_;
  Callback on_final_;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Fills this layer's parameters (called once after the store is finalized).
  virtual void init_params(ParamStore& store, uint64_t seed) {}
  virtual const Tensor& forward(const Tensor& in, const ForwardContext& ctx) = 0;
  // Accumulates parameter gradients, reports each via sink.ready(), and returns the
  // gradient w.r.t. the input (left empty when need_input_grad is false).
  virtual const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) = 0;
  // Parameters read by this layer, in the order it registered/uses them.
  virtual std::vector<size_t> used_params() const { return {}; }
  // True when forward/backward also run on tensors in CUDA memory (Module::to_cuda
  // refuses a model with a layer that does not).
  virtual bool supports_cuda() const { return false; }
  // Whether backward reads the tensor forward returned. When the last layer's does not,
  // the loss writes its gradient over that tensor (Module::loss, loss.h:
  // no second [B, T, V] buffer for a language model's logits). True unless a layer
  // says otherwise.
  virtual bool backward_reads_output() const { return true; }

  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// Rounds a layer's output (or a gradient it handed back) to fp16 in place, for
// ComputePrecision::kF16: "the values this layer produced were fp16". Layers hand out
// const references to tensors they own; the tensors themselves are not const. On CUDA a
// kernel rounds (gpu::round_to_f16, the same values).
inline void round_produced_to_f16(const Tensor& t) {
  if (t.numel() == 0) return;
  if (t.on_cuda()) gpu::round_to_f16(const_cast<Tensor&>(t).data(), t.numel());
  else round_to_f16(const_cast<Tensor&>(t).data(), t.numel());
}

// Prefix join for dotted names: join_name("blocks.2", "attn") == "blocks.2.attn".
inline std::string join_name(const std::string& prefix, const std::string& leaf) {
  return prefix.empty() ? leaf : prefix + "." + leaf;
}

}  // namespace dpt
