// Losses: scalar of the model output and the target, plus its gradient w.r.t. the
// output, which is where backward starts.
//   SoftmaxCrossEntropy: logits [rows, C] (any leading dims flattened into rows),
//     labels [rows]; loss = mean over rows of -log softmax(logits)[label].
//     d loss / d logits = (softmax - onehot) / rows.
//   Mse: mean over ALL elements of (y - target)^2 (PyTorch's MSELoss default);
//     d loss / d y = 2 (y - target) / numel.
// grad_scale multiplies the gradient only (e.g. 1/micro_batches for accumulation).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/tensor.h"

namespace dpt {

struct ModelTarget {
  const int32_t* labels = nullptr;  // class ids, one per output row
  const float* values = nullptr;    // regression targets, same numel as the output
};

class Loss {
 public:
  virtual ~Loss() = default;
  // Returns the mean loss and stores its gradient w.r.t. `output` (times grad_scale).
  virtual float forward(const Tensor& output, const ModelTarget& target, float grad_scale) = 0;
  const Tensor& grad() const { return grad_; }
  virtual std::string name() const = 0;

 protected:
  Tensor grad_;
};

class SoftmaxCrossEntropy : public Loss {
 public:
  float forward(const Tensor& logits, const ModelTarget& target, float grad_scale) override;
  std::string name() const override { return "softmax_cross_entropy"; }

 private:
  DeviceFloats labels_device_;  // CUDA logits: the labels on the device
  Tensor row_loss_;             // and each row's loss there
};

class MseLoss : public Loss {
 public:
  float forward(const Tensor& output, const ModelTarget& target, float grad_scale) override;
  std::string name() const override { return "mse"; }
};

}  // namespace dpt
