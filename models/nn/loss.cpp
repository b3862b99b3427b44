#include "models/nn/loss.h"

#include "device/runtime.h"
#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cpu/parallel_for.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "data/batch.h"
#include "models/kernels/cpu/fast_math.h"

namespace dpt {
namespace {

void check_label(int32_t label, size_t row, int64_t classes) {
  if (label == kIgnoreLabel || (label >= 0 && label < classes)) return;
  throw std::invalid_argument("cross entropy: label " + std::to_string(label) + " of row " + std::to_string(row) +
                              " outside [0, " + std::to_string(classes) + ") and not the ignore label " +
                              std::to_string(kIgnoreLabel));
}

// One row of logits z[0..c): writes g[j] = exp(z[j] - max) and returns {max, sum of g}.
// Sixteen running maxima and sums are kept side by side so the loops vectorise without
// reassociation flags (the sums' order is fixed, so results are deterministic).
struct RowExp { float max, sum; };
DPT_VECTOR_CLONES
RowExp exp_row(const float* z, float* g, int64_t c) {
  constexpr int64_t kLanes = 16;
  float lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + kLanes <= c; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] = lane[l] < z[j + l] ? z[j + l] : lane[l];
  float mx = lane[0];
  for (int64_t l = 1; l < kLanes; ++l) mx = mx < lane[l] ? lane[l] : mx;
  for (; j < c; ++j) mx = mx < z[j] ? z[j] : mx;
  std::fill(lane, lane + kLanes, 0.0f);
  j = 0;
  for (; j + kLanes <= c; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      const float e = fast_exp(z[j + l] - mx);
      g[j + l] = e;
      lane[l] += e;
    }
  float sum = 0.0f;
  for (; j < c; ++j) {
    g[j] = fast_exp(z[j] - mx);
    sum += g[j];
  }
  for (int64_t l = 0; l < kLanes; ++l) sum += lane[l];
  return {mx, sum};
}

DPT_VECTOR_CLONES
void scale_row(float* g, int64_t c, float s) {
  for (int64_t j = 0; j < c; ++j) g[j] *= s;
}

}  // namespace

int64_t count_target_labels(const int32_t* labels, size_t n) {
  int64_t count = 0;
  for (size_t i = 0; i < n; ++i) count += labels[i] != kIgnoreLabel;
  return count;
}

float Loss::mean_scale(const Tensor& output, const ModelTarget& target, float grad_scale) const {
  const int64_t n = count_targets(output, target);
  return n > 0 ? grad_scale / static_cast<float>(n) : 0.0f;
}

float Loss::forward(const Tensor& output, const ModelTarget& target, float grad_scale) {
  return static_cast<float>(forward_sum(output, target, mean_scale(output, target, grad_scale)).mean());
}

LossSum Loss::forward_sum(const Tensor& output, const ModelTarget& target, float grad_scale) {
  grad_.resize_like(output);
  return compute(output, target, grad_scale, grad_);
}

float Loss::forward_over(Tensor& output, const ModelTarget& target, float grad_scale) {
  return static_cast<float>(forward_sum_over(output, target, mean_scale(output, target, grad_scale)).mean());
}

LossSum Loss::forward_sum_over(Tensor& output, const ModelTarget& target, float grad_scale) {
  grad_ = Tensor();  // a buffer of the output's size is what this saves: give it back
  return compute(output, target, grad_scale, output);
}

int64_t SoftmaxCrossEntropy::count_targets(const Tensor& logits, const ModelTarget& target) const {
  if (!target.labels) throw std::invalid_argument("cross entropy needs class labels");
  return count_target_labels(target.labels, logits.numel() / static_cast<size_t>(logits.last_dim()));
}

LossSum SoftmaxCrossEntropy::compute(const Tensor& logits, const ModelTarget& target, float g_scale, Tensor& grad) {
  if (!target.labels) throw std::invalid_argument("cross entropy needs class labels");
  const int64_t c = logits.last_dim();
  const size_t rows = logits.numel() / static_cast<size_t>(c);
  for (size_t r = 0; r < rows; ++r) check_label(target.labels[r], r, c);
  LossSum out;
  out.count = count_target_labels(target.labels, rows);
  if (logits.on_cuda()) {
    // Labels travel as 4-byte words in a float array (same size, never read as floats).
    labels_device_.reserve(rows);
    device::copy(labels_device_.data(), target.labels, rows * sizeof(int32_t));
    row_loss_.set_device(TensorDevice::kCuda);
    row_loss_.resize({static_cast<int64_t>(rows)});
    gpu::softmax_cross_entropy(logits.data(), reinterpret_cast<const int32_t*>(labels_device_.data()),
                               grad.data(), row_loss_.data(), static_cast<int>(rows), static_cast<int>(c), g_scale,
                               kIgnoreLabel);
    const Tensor per_row = row_loss_.to_host();
    for (size_t r = 0; r < rows; ++r) out.sum += per_row[r];
    last_ = out;
    return out;
  }
  // Rows on parallel_for's threads, each row's loss kept and summed in row order after:
  // the same bits as one thread.
  row_terms_.resize(rows);
  parallel_for(static_cast<int64_t>(rows), parallel_grain(4 * c), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* z = logits.data() + r * c;
      float* g = grad.data() + r * c;  // may be z itself: z[label] is read first
      const int32_t label = target.labels[r];
      if (label == kIgnoreLabel) {
        std::fill(g, g + c, 0.0f);
        continue;
      }
      const float z_label = z[label];
      const RowExp e = exp_row(z, g, c);
      row_terms_[r] = std::log(e.sum) + e.max - z_label;
      scale_row(g, c, g_scale / e.sum);
      g[label] -= g_scale;
    }
  });
  for (size_t r = 0; r < rows; ++r)
    if (target.labels[r] != kIgnoreLabel) out.sum += row_terms_[r];
  last_ = out;
  return out;
}

LossSum MseLoss::compute(const Tensor& output, const ModelTarget& target, float grad_scale, Tensor& grad) {
  if (!target.values) throw std::invalid_argument("MSE needs regression targets");
  if (output.on_cuda()) {
    // Small regression outputs only (the toy model): computed on a host copy, the
    // gradient uploaded.
    MseLoss host;
    last_ = host.forward_sum(output.to_host(), target, grad_scale);
    device::copy(grad.data(), host.grad().data(), output.numel() * sizeof(float));
    return last_;
  }
  const size_t n = output.numel();
  const float* y = output.data();
  const float* t = target.values;
  float* g = grad.data();  // may be y itself: y[i] is read before g[i] is written
  const float scale = 2.0f * grad_scale;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float diff = y[i] - t[i];
    total += static_cast<double>(diff) * diff;
    g[i] = scale * diff;
  }
  last_ = {total, static_cast<int64_t>(n)};
  return last_;
}

}  // namespace dpt
