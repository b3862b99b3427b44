#pragma once
// What the single-process trainer (local_trainer.h) and the distributed one
// (dist_trainer.h) share: a Batch as model input, the default dataset of a model, and
// evaluation.
//
// Terms:
//   slice       the held-out samples [lo, hi) one process evaluates: all of them in a
//               single process, rank r's contiguous share in the distributed trainer.
//   eval sums   loss x samples, correct predictions, samples, and whether the model is
//               a classifier, over a slice: plain sums, so the ranks' sums reduce with
//               one allreduce into the whole set's.
//   classifier  a model with one row of logits per sample and integer labels (not a
//               language model, whose labels are per token): accuracy is reported.
#include <cstddef>
#include <optional>
#include <string>

#include "data/batch.h"
#include "data/dataset.h"
#include "models/nn/model_config.h"
#include "models/nn/module.h"

namespace dpt {

// Views of a Batch as model input and loss target (no copies).
ModelInput model_input(const Batch& b);
ModelTarget model_target(const Batch& b);

// The dataset a model trains on when none is named, its natural one: text (gpt, whose
// tokens are bytes), text-docs (gpt2: documents through GPT-2's BPE tokenizer, the
// fortunes unless a file is named), synthetic-regression (toy), fashion-mnist (the image
// models).
std::string default_dataset(const std::string& model);
// One line to print before training when the model and the data are an unusual pair
// (gpt2 on the byte-level text: GPT-2 ids 0-255 are bytes), else "".
std::string dataset_note(const std::string& model, const std::string& dataset);

// Image data ([C, H, W] samples): the model's input channels and size come from the
// data's first training sample (after padding), so CIFAR-10 (3x32x32) and Fashion-MNIST
// (1x28x28, or 1x32x32 with --image-size 32) need no model flags. Other data: unchanged.
void adapt_model_to_images(const Dataset& train, ModelConfig& config);

struct EvalResult {
  double loss = 0;                 // mean loss per target: per sample, per token for language models (nats)
  std::optional<double> accuracy;  // classifiers only
  size_t samples = 0;
};

struct EvalSums {
  // The loss as a sum over targets and their count (Module::loss_sum), so the mean is
  // over every target of the evaluated set whatever the batching: over tokens for a
  // language model (padding excluded), over samples for a classifier.
  double loss_sum = 0, targets = 0, correct = 0, samples = 0, classifier = 0;
  double* data() { return &loss_sum; }  // the five as one array (for an allreduce)
  static constexpr size_t kCount = 5;
};

// Evaluation batches of at most this many samples.
inline constexpr size_t kEvalBatch = 256;

// Forward passes (no gradients) over the slice, in order, in batches of batch_size.
EvalSums evaluate_slice(Module& model, const Dataset& dataset, size_t lo, size_t hi, size_t batch_size = kEvalBatch);
EvalResult eval_result(const EvalSums& sums);
// The first max_samples (0: all) held-out samples in one process.
EvalResult evaluate(Module& model, const Dataset& dataset, size_t batch_size = kEvalBatch, size_t max_samples = 0);

}  // namespace dpt
