#pragma once
// Adam and AdamW exactly as torch.optim.Adam / AdamW (amsgrad=False, maximize=False).
// Per element, with t the step number counted from 1, m and v the first and second moment
// estimates ("exp_avg", "exp_avg_sq"):
//   AdamW only:  p = p * (1 - lr * weight_decay)            (decoupled weight decay)
//   Adam only:   g = g + weight_decay * p                   (L2 penalty, if != 0)
//   m = m + (1 - beta1) * (g - m)        (torch's lerp; = beta1 m + (1 - beta1) g)
//   v = beta2 * v + (1 - beta2) * g * g
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// eps is added outside the square root, after the bias correction, as torch does.
#include <vector>

#include "models/kernels/cpu/huge_pages.h"
#include "optim/optimizer.h"
#include "optim/update_rules.h"

namespace dpt {

class Adam : public Optimizer {
 public:
  Adam(size_t numel, float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-8f,
       float weight_decay = 0.0f, bool decoupled_weight_decay = false);
  void step(std::span<float> params, std::span<const float> grads, float lr) override;
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }
  bool has_device_step() const override { return true; }
  // The per-element scalars of the coming step (step count already advanced) at lr.
  AdamScalars scalars(float lr) const;

 protected:
  // {"exp_avg", "exp_avg_sq"}.
  std::vector<std::pair<std::string, std::span<float>>> host_state() override;
  void device_step(float* params, const float* grads, float lr, const std::vector<float*>& state) override;

 private:
  float beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
  HostFloats exp_avg_, exp_avg_sq_;  // on huge pages: the step streams them whole
};

// Adam with decoupled weight decay (Loshchilov & Hutter).
class AdamW : public Adam {
 public:
  AdamW(size_t numel, float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-8f,
        float weight_decay = 0.01f)
      : Adam(numel, beta1, beta2, eps, weight_decay, true) {}
};

}  // namespace dpt
