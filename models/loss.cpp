#include "models/loss.h"

#include "models/cuda/gpu_ops.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/fast_math.h"

namespace dpt {

float SoftmaxCrossEntropy::forward(const Tensor& logits, const ModelTarget& target,
                                   float grad_scale) {
  if (!target.labels) throw std::invalid_argument("cross entropy needs class labels");
  const int64_t c = logits.last_dim();
  const size_t rows = logits.numel() / static_cast<size_t>(c);
  grad_.resize_like(logits);
  double total = 0.0;
  const float g_scale = grad_scale / static_cast<float>(rows);
  if (logits.on_cuda()) {
    for (size_t r = 0; r < rows; ++r)
      if (target.labels[r] < 0 || target.labels[r] >= c)
        throw std::invalid_argument("label " + std::to_string(target.labels[r]) + " outside [0, " +
                                    std::to_string(c) + ")");
    // Labels travel as 4-byte words in a float array (same size, never read as floats).
    labels_device_.reserve(rows);
    gpu::upload(labels_device_.data(), target.labels, rows * sizeof(int32_t));
    row_loss_.set_device(TensorDevice::kCuda);
    row_loss_.resize({static_cast<int64_t>(rows)});
    gpu::softmax_cross_entropy(logits.data(), reinterpret_cast<const int32_t*>(labels_device_.data()),
                               grad_.data(), row_loss_.data(), static_cast<int>(rows), static_cast<int>(c), g_scale);
    const Tensor per_row = row_loss_.to_host();
    for (size_t r = 0; r < rows; ++r) total += per_row[r];
    return static_cast<float>(total / static_cast<double>(rows));
  }
  for (size_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * c;
    float* g = grad_.data() + r * c;
    const int32_t label = target.labels[r];
    if (label < 0 || label >= c)
      throw std::invalid_argument("label " + std::to_string(label) + " outside [0, " +
                                  std::to_string(c) + ")");
    float mx = z[0];
    for (int64_t j = 1; j < c; ++j) mx = std::max(mx, z[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < c; ++j) {
      g[j] = fast_exp(z[j] - mx);
      sum += g[j];
    }
    const float inv = 1.0f / sum;
    total += std::log(sum) + mx - z[label];
    for (int64_t j = 0; j < c; ++j) g[j] *= inv * g_scale;
    g[label] -= g_scale;
  }
  return static_cast<float>(total / static_cast<double>(rows));
}

float MseLoss::forward(const Tensor& output, const ModelTarget& target, float grad_scale) {
  if (!target.values) throw std::invalid_argument("MSE needs regression targets");
  if (output.on_cuda()) {
    // Small regression outputs only (the toy model): computed on a host copy, the
    // gradient uploaded.
    MseLoss host;
    const float value = host.forward(output.to_host(), target, grad_scale);
    grad_.resize_like(output);
    gpu::upload(grad_.data(), host.grad().data(), output.numel() * sizeof(float));
    return value;
  }
  const size_t n = output.numel();
  grad_.resize_like(output);
  const float* y = output.data();
  const float* t = target.values;
  float* g = grad_.data();
  const float scale = 2.0f * grad_scale / static_cast<float>(n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float diff = y[i] - t[i];
    total += static_cast<double>(diff) * diff;
    g[i] = scale * diff;
  }
  return static_cast<float>(total / static_cast<double>(n));
}

}  // namespace dpt
