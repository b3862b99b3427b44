// Embedding: looks up rows of a [vocab, d] table for the token ids in
// ModelInput::tokens ([n, T]); with a position table ([max_T, d]) it adds row t to the
// token at position t, as GPT does. Output [n, T, d].
// Backward scatters dout rows back: dtable[token] += dout[b, t], dpos[t] += dout[b, t].
//
// TiedHead: the output head of a weight-tied language model, logits = x E^T where E is
// the token table. It reads the embedding's parameter but does not own it, so E's
// gradient is only final after the embedding's own backward (the GradSink counts it).
#pragma once

#include "models/kernels/cpu/bf16.h"
#include "models/nn/layer.h"
#include "models/nn/token_groups.h"

namespace dpt {

class Embedding : public Layer {
 public:
  // max_positions == 0: no position table. Initial values: N(0, 0.02) for the token
  // table, N(0, position_std) for the position table.
  Embedding(ParamStore& store, const std::string& token_name, int64_t vocab, int64_t dim,
            const std::string& position_name = "", int64_t max_positions = 0, float position_std = 0.01f);
  void init_params(ParamStore& store, uint64_t seed) override;
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }
  std::vector<size_t> used_params() const override;
  size_t token_table() const { return tok_; }

 private:
  ParamStore& store_;
  int64_t vocab_, d_, max_pos_;
  float pos_std_;
  size_t tok_ = 0, pos_ = 0;
  std::vector<int32_t> tokens_;  // copy of this step's ids, needed by backward
  DeviceFloats tokens_device_;   // the same ids on the device (as 4-byte words), for CUDA
  TokenGroups groups_;           // CUDA: positions grouped by id, for backward without atomics
  DeviceFloats groups_device_;   // groups_.words() on the device
  bool grouped_ = false;         // the last CUDA forward was in training: groups_ is its batch's
  int64_t n_ = 0, t_ = 0;
  Tensor y_, none_;
};

class TiedHead : public Layer {
 public:
  TiedHead(ParamStore& store, const std::string& name, size_t table, int64_t vocab, int64_t dim);
  const Tensor& forward(const Tensor& in, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dout, GradSink& sink, bool need_input_grad) override;
  bool supports_cuda() const override { return true; }
  std::vector<size_t> used_params() const override { return {table_}; }
  bool backward_reads_output() const override { return false; }  // x and the weights only

 private:
  ParamStore& store_;
  size_t table_;
  int64_t vocab_, d_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
  bool bf16_ = false;  // of the last forward: the products on bf16 copies (as Linear's)
  Bf16Copy x16_, w16_, dy16_;
};

}  // namespace dpt
