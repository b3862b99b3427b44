#pragma once
// Optimizers that step over flat spans. Terms: an optimizer *owns* numel elements, a
// contiguous slice of the flat parameter buffer (all of it in DDP, this rank's shard in
// ZeRO); its *state* (momentum, Adam moments) is sized for exactly that slice, and each
// element's update depends only on that element's parameter, gradient and state. That is
// why stepping two halves of a buffer with two optimizers gives the same numbers as
// stepping the whole buffer with one, and ZeRO can step a shard with this same code.
// The *step count* is the number of step() calls so far (torch's state["step"]).
//
// Device-resident (to_device; DDP's device mode, docs/gpu.md): the state moves to the
// current CUDA device and step_on_device() updates device parameters with device
// gradients (optim/cuda/device_steps.h, the CPU loop's bits). The host buffers remain the
// checkpoint's view: state_buffers() downloads the device state into them first, and the
// next device step uploads them again, so a restore that writes through them lands.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/kernels/cuda/device_floats.h"

namespace dpt {

struct OptimizerConfig {
  // SGD (torch.optim.SGD): dampening applies from the second step on, as in torch.
  float momentum = 0.0f;
  float dampening = 0.0f;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0, as in torch
  // Adam / AdamW (torch.optim.Adam / AdamW).
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  // SGD and Adam: L2 penalty added to the gradient. AdamW: decoupled decay, the parameter
  // is multiplied by (1 - lr * weight_decay) before the Adam update. Note torch's AdamW
  // defaults to 0.01; here every optimizer defaults to 0, so set it explicitly.
  float weight_decay = 0.0f;
};

class Optimizer {
 public:
  explicit Optimizer(size_t numel) : numel_(numel) {}
  virtual ~Optimizer();

  // One update of the owned slice. params and grads must both have numel() elements
  // (std::invalid_argument otherwise). lr is passed per step so schedules stay outside.
  virtual void step(std::span<float> params, std::span<const float> grads, float lr) = 0;

  // The named state buffers, each numel() elements ("momentum_buffer"; "exp_avg",
  // "exp_avg_sq"), as mutable views: a checkpoint writes them, a restore copies into them
  // and then calls set_step_count. Empty for state-free optimizers. Device-resident: the
  // device state's current values (downloaded here).
  std::vector<std::pair<std::string, std::span<float>>> state_buffers();
  virtual std::string name() const = 0;

  // Whether this optimizer has a device step (SGD, Adam, AdamW do).
  virtual bool has_device_step() const { return false; }
  // Moves the state to the current CUDA device (std::logic_error without a device step).
  void to_device();
  bool on_device() const { return on_device_; }
  // One update of numel() device parameters with device gradients; after to_device().
  void step_on_device(float* params, const float* grads, float lr);

  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps) { step_count_ = steps; }
  size_t numel() const { return numel_; }

 protected:
  // Checks the spans' sizes against numel(); names the optimizer in the error.
  void check_sizes(std::span<const float> params, std::span<const float> grads) const;
  // The host state buffers (state_buffers() without the device refresh).
  virtual std::vector<std::pair<std::string, std::span<float>>> host_state();
  // The device step: `state` holds the device copies of host_state()'s buffers, in order.
  // Advances the step count as step() does.
  virtual void device_step(float* params, const float* grads, float lr, const std::vector<float*>& state);

  size_t numel_;
  int64_t step_count_ = 0;

 private:
  void upload_state();

  bool on_device_ = false;
  bool host_state_written_ = false;  // a state_buffers() view was handed out since the last upload
  std::vector<DeviceFloats> device_state_;
};

// name: "sgd" | "adam" | "adamw"; unknown names throw std::invalid_argument listing the
// valid ones, as do invalid hyperparameters (torch's checks).
std::unique_ptr<Optimizer> make_optimizer(std::string_view name, const OptimizerConfig& config,
                                          size_t numel);

}  // namespace dpt
