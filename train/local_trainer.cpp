#include "train/local_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "data/loading/loader.h"
#include "data/make_dataset.h"
#include "data/loading/sampler.h"
#include "data/text/text_corpus.h"
#include "models/io/checkpoint.h"
#include "models/zoo/generate.h"
#include "models/zoo/models.h"
#include "optim/clip_grad.h"
#include "train/init_from.h"

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0, double e = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d, e);
  return buf;
}

}  // namespace

GemmRecorder record_step_gemms(Module& model, const Batch& batch) {
  GemmRecorder rec;
  {
    GemmRecordScope scope(rec);
    model.train_step(model_input(batch), model_target(batch));
  }
  model.zero_grad();
  return rec;
}

LocalTrainer::LocalTrainer(LocalTrainConfig config) : config_(std::move(config)) {
  if (config_.dataset.empty()) config_.dataset = default_dataset(config_.model);
  if (const std::string note = dataset_note(config_.model, config_.dataset); !note.empty()) log(note);
  DatasetOptions opts;
  opts.path = config_.data_path;
  opts.jsonl_field = config_.jsonl_field;
  opts.tokenizer_dir = config_.tokenizer_dir;
  opts.seq_len = static_cast<size_t>(config_.model_config.seq_len);
  opts.val_fraction = config_.val_fraction;
  opts.val_path = config_.val_file;
  opts.stride = config_.text_stride;
  opts.seed = config_.seed;
  opts.image = config_.image;
  train_ = make_dataset(config_.dataset, Split::train, opts);
  opts.stride = 0;  // evaluate on non-overlapping windows
  opts.image.augment = Augment::none;
  test_ = make_dataset(config_.dataset, Split::test, opts);
  // Image sizes come from the data, so a CIFAR-10 run needs no extra flags.
  adapt_model_to_images(*train_, config_.model_config);
  set_model_classes(*train_, config_.num_classes, config_.model_config);
  model_ = make_model(config_.model, config_.model_config);
  if (!config_.init_from.empty()) {
    const std::string note =
        load_init_from(config_.init_from, config_.model, *model_, config_.num_classes > 0, train_->name());
    if (!note.empty()) log(note);
  }
  if (config_.lr_config.total_steps <= 0) {  // the schedule spans the whole run
    const int64_t per_epoch = static_cast<int64_t>(train_->size() / config_.batch_size);
    const int64_t steps = config_.max_steps > 0 ? std::min(config_.max_steps, per_epoch * config_.epochs)
                                                 : per_epoch * config_.epochs;
    config_.lr_config.total_steps = std::max<int64_t>(steps, config_.lr_config.warmup_steps + 1);
  }
  optimizer_ = make_optimizer(config_.optimizer, config_.optimizer_config, model_->num_params());
  schedule_ = make_lr_schedule(config_.lr_schedule, config_.lr_config);
}

LocalTrainer::~LocalTrainer() = default;

void LocalTrainer::log(const std::string& line) const {
  if (config_.on_log) config_.on_log(line);
}

float LocalTrainer::train_step(const Batch& batch) {
  model_->zero_grad();
  const float loss = model_->train_step(model_input(batch), model_target(batch));
  if (config_.clip_norm > 0) clip_grad_norm(model_->flat_grads(), config_.clip_norm);
  optimizer_->step(model_->flat_params(), model_->flat_grads(), schedule_->lr(step_));
  ++step_;
  return loss;
}

EvalResult LocalTrainer::evaluate_held_out() {
  return evaluate(*model_, *test_, config_.eval_batch_size, config_.max_eval_samples);
}

std::string LocalTrainer::generate(const std::string& prompt, int64_t n, float temperature,
                                   uint64_t seed) {
  std::vector<int32_t> ctx(prompt.begin(), prompt.end());
  for (auto& t : ctx) t = static_cast<uint8_t>(t);
  auto out = generate_tokens(*model_, ctx, config_.model_config.seq_len, n, temperature, seed);
  return std::string(out.begin(), out.end());
}

LocalTrainResult LocalTrainer::run() {
  LocalTrainResult result;
  result.num_params = model_->num_params();
  if (auto* text = dynamic_cast<const TextCorpus*>(test_.get()))
    result.unigram_entropy = text->unigram_entropy();

  DistributedSampler sampler(train_->size(), 1, 0, /*shuffle=*/true, config_.seed);
  DataLoader loader(*train_, sampler, config_.batch_size, /*drop_last_batch=*/true, config_.prefetch);
  Batch batch;
  double total_seconds = 0;
  size_t total_samples = 0;
  bool stop = false;
  for (int epoch = 0; epoch < config_.epochs && !stop; ++epoch) {
    loader.reset(static_cast<uint64_t>(epoch));
    EpochReport rep;
    rep.epoch = epoch;
    double loss_sum = 0;
    size_t samples = 0;
    const auto t0 = Clock::now();
    while (loader.next(batch)) {
      if (result.flops_per_sample == 0 && config_.measure_gemm) {
        // Record the GEMM mix of one real step before training on it (gradients are
        // zeroed after, so the step itself is not applied twice).
        GemmRecorder rec = record_step_gemms(*model_, batch);
        result.flops_per_sample = rec.total_flops() / static_cast<double>(batch.n);
        result.sgemm_gflops = benchmark_gemm_calls(rec, 1.0).gflops();
      }
      const auto ts = Clock::now();
      loss_sum += train_step(batch);
      rep.train_seconds += seconds_since(ts);
      samples += batch.n;
      ++rep.steps;
      if (config_.log_every > 0 && step_ % config_.log_every == 0)
        log(format("step %5.0f  loss %.4f  lr %.2e", double(step_), loss_sum / rep.steps,
                   schedule_->lr(step_)));
      if (config_.max_steps > 0 && step_ >= config_.max_steps) {
        stop = true;
        break;
      }
    }
    // Wall time of the epoch's loop (data waits included) is what a user experiences;
    // step time alone is what the model costs. Report step time; log both.
    const double wall = seconds_since(t0);
    rep.train_loss = rep.steps ? loss_sum / static_cast<double>(rep.steps) : 0.0;
    rep.samples_per_s = rep.train_seconds > 0 ? samples / rep.train_seconds : 0.0;
    rep.achieved_gflops = rep.samples_per_s * result.flops_per_sample / 1e9;
    rep.eval = evaluate_held_out();
    total_seconds += rep.train_seconds;
    total_samples += samples;
    // Accuracy only where there is one (classifiers); a language model's loss is per token.
    std::string line = format("epoch %.0f  train loss %.4f  held-out loss %.4f", epoch, rep.train_loss, rep.eval.loss);
    if (rep.eval.accuracy) line += format("  acc %.4f", *rep.eval.accuracy);
    log(line + format("  (%.1f s)", wall));
    result.epochs.push_back(rep);
  }
  result.samples_per_s = total_seconds > 0 ? total_samples / total_seconds : 0.0;
  result.achieved_gflops = result.samples_per_s * result.flops_per_sample / 1e9;
  if (!config_.save_path.empty())
    save_model(config_.save_path, *model_,
               {{"epochs", std::to_string(result.epochs.size())}, {"steps", std::to_string(step_)}});
  return result;
}

}  // namespace dpt
