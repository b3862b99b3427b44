#include "train/trainer_common.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace dpt {

ModelInput model_input(const Batch& b) {
  ModelInput in;
  in.n = static_cast<int64_t>(b.n);
  in.sample_shape = b.sample_shape;
  if (!b.tokens.empty()) in.tokens = b.tokens.data();
  if (!b.x.empty()) in.x = b.x.data();
  return in;
}

ModelTarget model_target(const Batch& b) {
  ModelTarget t;
  if (!b.labels.empty()) t.labels = b.labels.data();
  if (!b.targets.empty()) t.values = b.targets.data();
  return t;
}

std::string default_dataset(const std::string& model) {
  if (model == "gpt") return "text";
  if (model == "gpt2") return "text-docs";
  if (model == "toy") return "synthetic-regression";
  return "fashion-mnist";
}

std::string dataset_note(const std::string& model, const std::string& dataset) {
  if (model == "gpt2" && dataset == "text")
    return "note: --dataset text with --model gpt2 trains on raw bytes (token ids 0-255 of GPT-2's 50257), not on "
           "GPT-2's BPE tokens; leave --dataset out (text-docs) to tokenize";
  return "";
}

void adapt_model_to_images(const Dataset& train, ModelConfig& config) {
  Batch probe;
  const size_t first = 0;
  train.fill(std::span<const size_t>(&first, 1), probe);
  if (probe.sample_shape.size() != 3) return;
  config.in_channels = probe.sample_shape[0];
  config.image_h = probe.sample_shape[1];
  config.image_w = probe.sample_shape[2];
}

EvalSums evaluate_slice(Module& model, const Dataset& dataset, size_t lo, size_t hi, size_t batch_size) {
  EvalSums s;
  Batch batch;
  std::vector<size_t> idx;
  for (size_t start = lo; start < hi; start += batch_size) {
    const size_t count = std::min(batch_size, hi - start);
    idx.resize(count);
    std::iota(idx.begin(), idx.end(), start);
    dataset.fill(idx, batch);
    model.forward(model_input(batch), false);
    // Accuracy for classifiers: one row of logits per sample, read before the loss
    // writes its gradient over them (Module::loss).
    if (!batch.labels.empty() && !model.takes_tokens() && batch.labels.size() == count) {
      const Tensor& out = model.host_output();
      s.classifier = 1;
      const int64_t c = out.last_dim();
      for (size_t i = 0; i < count; ++i) {
        const float* row = out.data() + i * size_t(c);
        s.correct += double(std::max_element(row, row + c) - row == batch.labels[i]);
      }
    }
    const LossSum l = model.loss_sum(model_target(batch), 1.0f);
    s.loss_sum += l.sum;
    s.targets += double(l.count);
    s.samples += double(count);
  }
  return s;
}

EvalResult eval_result(const EvalSums& s) {
  EvalResult e;
  e.samples = size_t(s.samples);
  e.loss = s.targets > 0 ? s.loss_sum / s.targets : 0;
  if (s.classifier > 0 && s.samples > 0) e.accuracy = s.correct / s.samples;
  return e;
}

EvalResult evaluate(Module& model, const Dataset& dataset, size_t batch_size, size_t max_samples) {
  const size_t n = max_samples > 0 ? std::min(max_samples, dataset.size()) : dataset.size();
  return eval_result(evaluate_slice(model, dataset, 0, n, batch_size));
}

}  // namespace dpt
