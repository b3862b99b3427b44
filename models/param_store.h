// ParamStore: every parameter and every gradient of a model lives in ONE contiguous
// flat float buffer (params_, grads_). A parameter is a named view into it:
//   offset = index of its first element in the flat buffer,
//   numel  = product of its shape.
// Parameters are registered in the order the model first uses them in forward, so
// the flat buffer runs input-to-output and gradients become final back-to-front:
// a DDP bucket or a ZeRO shard is a plain slice of these buffers.
//
// Two phases: add() while the layers are constructed, then finalize() allocates.
// After finalize() the buffers never move, so raw pointers into them stay valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dpt {

struct ParamInfo {
  std::string name;            // stable dotted name, e.g. "blocks.2.attn.qkv.weight"
  std::vector<int64_t> shape;  // PyTorch layout: Linear weight is [out, in]
  size_t offset = 0;           // first element in the flat buffers
  size_t numel = 0;
  size_t index = 0;            // position in param_infos()
};

class ParamStore {
 public:
  // Registers a parameter; returns its index. Only before finalize().
  size_t add(const std::string& name, std::vector<int64_t> shape);
  void finalize();
  bool finalized() const { return finalized_; }

  float* param(size_t index) { return params_.data() + infos_[index].offset; }
  const float* param(size_t index) const { return params_.data() + infos_[index].offset; }
  float* grad(size_t index) { return grads_.data() + infos_[index].offset; }
  std::span<float> param_span(size_t index) { return {param(index), infos_[index].numel}; }
  std::span<float> grad_span(size_t index) { return {grad(index), infos_[index].numel}; }

  std::span<float> flat_params() { return params_; }
  std::span<const float> flat_params() const { return params_; }
  std::span<float> flat_grads() { return grads_; }
  std::span<const float> flat_grads() const { return grads_; }
  const std::vector<ParamInfo>& infos() const { return infos_; }
  size_t total_numel() const { return total_; }
  // Index of the parameter called `name`, or infos().size() when there is none.
  size_t find(const std::string& name) const;

 private:
  std::vector<ParamInfo> infos_;
  std::vector<float> params_;
  std::vector<float> grads_;
  size_t total_ = 0;
  bool finalized_ = false;
};

}  // namespace dpt
