// The single-process training path: model + dataset + optimizer, epochs over a
// DataLoader, evaluation, and the speed figures. The distributed trainer reuses its
// pieces (trainer_common.h: batch conversion, evaluation; the GEMM measurement) and adds communication
// between backward and the optimizer step.
//
// Terms:
//   step            one optimizer update on one batch (forward, loss, backward, step).
//   samples/s       training samples processed per second of step time (data waits
//                   included, evaluation excluded).
//   model FLOPs     2*m*n*k summed over every GEMM one training step issues (forward
//                   and backward), divided by the batch size; measured by recording the
//                   GEMM calls of a real step. Elementwise work is not counted.
//   achieved GFLOP/s  model FLOPs per sample x samples/s.
//   sgemm GFLOP/s   raw OpenBLAS cblas_sgemm on exactly the recorded calls, timed in
//                   the same process; the ratio of the two is the efficiency figure.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/images/image_transform.h"
#include "models/kernels/cpu/gemm.h"
#include "models/nn/model_config.h"
#include "models/nn/module.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/trainer_common.h"

namespace dpt {

struct LocalTrainConfig {
  std::string model = "mlp";       // toy | mlp | cnn | gpt
  std::string dataset;             // empty: the model's (default_dataset: text-docs for gpt2,
                                   // text for gpt, synthetic-regression for toy, else fashion-mnist)
  std::string data_path;           // empty: the dataset's default location
  std::string jsonl_field;         // text-docs: the documents are this field of JSON lines
  std::string tokenizer_dir;       // text-docs: GPT-2's vocabulary (empty: the installed one)
  double val_fraction = 0.1;       // text-docs: share of the documents held out (text_docs.h)
  std::string val_file;            // text-docs: held-out documents from this file instead
  ImageOptions image;              // image datasets: padding to a size for both splits,
                                   // augmentation for the training split only
  ModelConfig model_config;
  int epochs = 1;
  int64_t max_steps = 0;           // >0: stop after this many steps in total
  size_t batch_size = 64;
  size_t eval_batch_size = 256;
  size_t max_eval_samples = 0;     // >0: evaluate on the first N held-out samples only
  std::string optimizer = "adam";  // sgd | adam | adamw
  OptimizerConfig optimizer_config;
  std::string lr_schedule = "constant";  // constant | step | cosine
  LrScheduleConfig lr_config;      // lr_config.lr is the base rate; total_steps <= 0:
                                   // the run's length (max_steps or epochs x batches)
  float clip_norm = 0.0f;          // >0: clip the global gradient norm
  uint64_t seed = 0;               // data order; model init comes from model_config.seed
  size_t prefetch = 2;
  size_t text_stride = 0;          // gpt: window spacing (0 = seq_len)
  int log_every = 0;               // >0: call on_log every N steps
  bool measure_gemm = true;
  std::string save_path;           // non-empty: save the model here after training
  std::string init_from;           // non-empty: load parameters and buffers from this
                                   // safetensors file (our names = torchvision's for resnet18;
                                   // train/init_from.h)
  int64_t num_classes = 0;         // classification data: the head's classes (0: the data's)
  std::function<void(const std::string&)> on_log;  // progress lines
};

struct EpochReport {
  int epoch = 0;
  int64_t steps = 0;
  double train_loss = 0;           // mean over the epoch's steps
  EvalResult eval;
  double train_seconds = 0;
  double samples_per_s = 0;
  double achieved_gflops = 0;
};

struct LocalTrainResult {
  std::vector<EpochReport> epochs;
  double flops_per_sample = 0;     // model FLOPs of one training sample
  double sgemm_gflops = 0;         // OpenBLAS on the model's own GEMM calls
  double achieved_gflops = 0;      // over the whole run
  double samples_per_s = 0;
  double unigram_entropy = 0;      // text: of the validation split, nats per byte
  size_t num_params = 0;
};

// Records the GEMM calls of one training step on `batch` (gradients are zeroed after).
GemmRecorder record_step_gemms(Module& model, const Batch& batch);

class LocalTrainer {
 public:
  explicit LocalTrainer(LocalTrainConfig config);
  ~LocalTrainer();

  LocalTrainResult run();
  // One step on a batch: forward, loss, backward, clip, optimizer step. Returns the loss.
  float train_step(const Batch& batch);
  EvalResult evaluate_held_out();
  // Language models: continue `prompt` by n bytes.
  std::string generate(const std::string& prompt, int64_t n, float temperature, uint64_t seed);

  Module& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  const Dataset& train_set() const { return *train_; }
  const Dataset& held_out_set() const { return *test_; }
  const LocalTrainConfig& config() const { return config_; }

 private:
  void log(const std::string& line) const;

  LocalTrainConfig config_;
  std::unique_ptr<Module> model_;
  std::unique_ptr<Dataset> train_, test_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  int64_t step_ = 0;
};

}  // namespace dpt
