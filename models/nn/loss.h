// Losses: scalar of the model output and the target, plus its gradient w.r.t. the
// output, which is where backward starts.
//   SoftmaxCrossEntropy: logits [rows, C] (any leading dims flattened into rows),
//     labels [rows]; a row whose label is kIgnoreLabel (-100, data/batch.h) is not a
//     target: it adds nothing to the loss, gets a zero gradient, and is not counted.
//     loss_r = -log softmax(logits_r)[label_r]; d loss_r / d logits_r = softmax - onehot.
//   Mse: every element is a target, (y - target)^2; d/dy = 2 (y - target).
//
// Two ways to reduce over the counted targets:
//   forward_sum  returns {sum of the per-target losses, count of targets} and stores the
//                gradient of grad_scale * sum. A data-parallel trainer sums both over
//                ranks and passes grad_scale = 1 / (global count), so the step's loss is
//                the mean over all target tokens of the global batch.
//   forward      the mean, sum / count (PyTorch's reduction="mean", with ignore_index),
//                with the gradient of grad_scale * mean. No target at all: 0 and a zero
//                gradient (PyTorch would give NaN).
// grad_scale multiplies the gradient only (e.g. 1/micro_batches for accumulation).
//
// Where the gradient goes:
//   grad()       forward and forward_sum write it into the loss's own buffer.
//   over output  forward_over and forward_sum_over write it over the output tensor
//                itself, each element after it was read (llm.c's fused classifier does
//                the same): for a language model the logits are [B, T, V] floats, 3.3 GB
//                at GPT-2's 16 x 1024 x 50257, and a training step has no use for them
//                once the loss has read them, so the second buffer of that size is
//                saved. Module::loss does this when its last layer's backward does not
//                read its output (Layer::backward_reads_output).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/tensor.h"

namespace dpt {

struct ModelTarget {
  const int32_t* labels = nullptr;  // class ids, one per output row (kIgnoreLabel: skip)
  const float* values = nullptr;    // regression targets, same numel as the output
};

struct LossSum {
  double sum = 0;     // sum of the per-target losses
  int64_t count = 0;  // targets counted
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
};

// Labels that count as targets among `n` (those that are not kIgnoreLabel).
int64_t count_target_labels(const int32_t* labels, size_t n);

class Loss {
 public:
  virtual ~Loss() = default;
  // The mean over counted targets; stores its gradient w.r.t. `output` (times grad_scale).
  float forward(const Tensor& output, const ModelTarget& target, float grad_scale);
  // The sum and the count; stores the gradient of grad_scale * sum.
  LossSum forward_sum(const Tensor& output, const ModelTarget& target, float grad_scale);
  // The same two with the gradient written over `output` (grad() is left empty, its
  // memory released); the loss is the same bits as forward's and forward_sum's.
  float forward_over(Tensor& output, const ModelTarget& target, float grad_scale);
  LossSum forward_sum_over(Tensor& output, const ModelTarget& target, float grad_scale);
  // How many targets forward_sum counts for this output and target (no arithmetic).
  virtual int64_t count_targets(const Tensor& output, const ModelTarget& target) const = 0;
  const Tensor& grad() const { return grad_; }
  const LossSum& last() const { return last_; }  // of the last forward or forward_sum
  virtual std::string name() const = 0;

 protected:
  // The loss of `output` and the gradient of g_scale * sum into `grad`, which has
  // output's shape and device and may be `output` itself: each element is read before
  // its gradient is written. Sets last_.
  virtual LossSum compute(const Tensor& output, const ModelTarget& target, float g_scale, Tensor& grad) = 0;
  // The gradient scale that makes the sum's gradient the mean's: grad_scale / count.
  float mean_scale(const Tensor& output, const ModelTarget& target, float grad_scale) const;

  Tensor grad_;
  LossSum last_;
};

class SoftmaxCrossEntropy : public Loss {
 public:
  int64_t count_targets(const Tensor& logits, const ModelTarget& target) const override;
  std::string name() const override { return "softmax_cross_entropy"; }

 private:
  LossSum compute(const Tensor& logits, const ModelTarget& target, float g_scale, Tensor& grad) override;

  DeviceFloats labels_device_;  // CUDA logits: the labels on the device
  Tensor row_loss_;             // and each row's loss there
  std::vector<float> row_terms_;  // CPU logits: each row's loss, summed in row order
};

class MseLoss : public Loss {
 public:
  int64_t count_targets(const Tensor& output, const ModelTarget&) const override {
    return static_cast<int64_t>(output.numel());
  }
  std::string name() const override { return "mse"; }

 private:
  LossSum compute(const Tensor& output, const ModelTarget& target, float g_scale, Tensor& grad) override;
};

}  // namespace dpt
