#pragma once
// Learning-rate schedules. Terms: `step` is the 0-based index of the optimizer step about
// to be taken (the first step is 0); lr(step) is the rate to pass to Optimizer::step.
//   constant : lr
//   step     : lr * gamma^floor(step / step_size)       (torch.optim.lr_scheduler.StepLR)
//   cosine   : linear warm-up lr * (step + 1) / warmup_steps for step < warmup_steps,
//              then min_lr + (lr - min_lr) * (1 + cos(pi * r)) / 2 with
//              r = (step - warmup_steps) / (total_steps - warmup_steps), and min_lr from
//              total_steps on (llm.c's schedule).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dpt {

struct LrScheduleConfig {
  float lr = 1e-3f;            // base (peak) learning rate
  int64_t step_size = 1000;    // step: decay every step_size steps
  float gamma = 0.1f;          // step: decay factor
  int64_t warmup_steps = 0;    // cosine
  int64_t total_steps = 1000;  // cosine: must exceed warmup_steps
  float min_lr = 0.0f;         // cosine: floor reached at total_steps
};

class LrSchedule {
 public:
  virtual ~LrSchedule();
  virtual float lr(int64_t step) const = 0;
  virtual std::string name() const = 0;
};

class ConstantLr : public LrSchedule {
 public:
  explicit ConstantLr(float lr) : lr_(lr) {}
  float lr(int64_t) const override { return lr_; }
  std::string name() const override { return "constant"; }

 private:
  float lr_;
};

class StepLr : public LrSchedule {
 public:
  StepLr(float lr, int64_t step_size, float gamma);
  float lr(int64_t step) const override;
  std::string name() const override { return "step"; }

 private:
  float lr_;
  int64_t step_size_;
  float gamma_;
};

class CosineWarmupLr : public LrSchedule {
 public:
  CosineWarmupLr(float lr, int64_t warmup_steps, int64_t total_steps, float min_lr = 0.0f);
  float lr(int64_t step) const override;
  std::string name() const override { return "cosine"; }

 private:
  float lr_;
  int64_t warmup_steps_, total_steps_;
  float min_lr_;
};

// kind: "constant" | "step" | "cosine"; unknown kinds and invalid settings throw
// std::invalid_argument.
std::unique_ptr<LrSchedule> make_lr_schedule(std::string_view kind, const LrScheduleConfig& config);

}  // namespace dpt
