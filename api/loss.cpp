// The free-standing losses (dpt/nn.h) over the internal ones (models/nn/loss.h): the same
// arithmetic the zoo's models and the trainer use.
#include <algorithm>
#include <stdexcept>

#include "api/tensor_convert.h"
#include "dpt/nn.h"
#include "models/nn/loss.h"

namespace dpt::nn {
using ::dpt::to_internal;
using ::dpt::to_public;

Loss Loss::operator/(float d) const {
  if (!(d != 0.0f)) throw std::invalid_argument("dpt::nn::Loss: division by zero");
  Tensor g = grad_;
  for (float& v : g.values()) v /= d;
  return Loss(value_ / d, std::move(g));
}

Loss mse_loss(const Tensor& output, const Tensor& target) {
  if (output.shape() != target.shape())
    throw std::invalid_argument("dpt::nn::mse_loss: the output has shape " + output.shape_text() + ", the target " +
                                target.shape_text());
  ::dpt::MseLoss loss;
  ::dpt::ModelTarget t;
  t.values = target.data();
  const float value = loss.forward(to_internal(output), t, 1.0f);
  return Loss(value, to_public(loss.grad()));
}

Loss cross_entropy(const Tensor& logits, std::span<const int32_t> labels) {
  if (logits.dim() < 2)
    throw std::invalid_argument("dpt::nn::cross_entropy: logits of shape " + logits.shape_text() +
                                " ([rows, classes] expected)");
  const size_t classes = size_t(logits.shape().back());
  const size_t rows = classes > 0 ? logits.numel() / classes : 0;
  if (labels.size() != rows)
    throw std::invalid_argument("dpt::nn::cross_entropy: " + std::to_string(labels.size()) + " labels for " +
                                std::to_string(rows) + " rows of logits " + logits.shape_text());
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] != -100 && (labels[i] < 0 || size_t(labels[i]) >= classes))
      throw std::invalid_argument("dpt::nn::cross_entropy: label " + std::to_string(labels[i]) + " at row " +
                                  std::to_string(i) + " (classes 0.." + std::to_string(classes - 1) +
                                  ", or -100 to ignore the row)");
  ::dpt::SoftmaxCrossEntropy loss;
  ::dpt::ModelTarget t;
  t.labels = labels.data();
  const float value = loss.forward(to_internal(logits), t, 1.0f);
  return Loss(value, to_public(loss.grad()));
}

}  // namespace dpt::nn
