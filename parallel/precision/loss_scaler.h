#pragma once
// Dynamic loss scaling for fp16 mixed precision (train --precision fp16), with
// torch.cuda.amp.GradScaler's semantics, agreed by every rank.
//
// Terms:
//   scale           S: the loss is multiplied by S before backward, so small gradients
//                   stay above fp16's underflow (2^-24); the gradients are divided by S
//                   (multiplied by the fp32 reciprocal, as GradScaler.unscale_ does)
//                   before clipping and the optimizer step.
//   found inf       some synchronized gradient element this rank owns is inf or NaN
//                   after unscaling. Under ZeRO-2/3 a rank sees only its own shard, so
//                   the flags are combined with one allreduce(max): every rank decides
//                   the same, and every rank skips the same steps.
//   skipped step    a step with found inf: no optimizer update; S *= backoff (0.5) and
//                   the growth tracker restarts.
//   growth tracker  clean steps since the last change of S; at growth_interval (2000)
//                   S *= growth (2) and it restarts.
//   state           (S, growth tracker, skipped steps): kept in checkpoints (exact, as
//                   hexadecimal floats), so a resumed run continues bit for bit.
#include <cstdint>
#include <span>

#include "comm/communicator.h"

namespace dpt {

struct LossScalerConfig {
  float init_scale = 65536.0f;
  int64_t growth_interval = 2000;
  float growth_factor = 2.0f, backoff_factor = 0.5f;
};

struct LossScalerState {
  float scale = 65536.0f;
  int64_t growth_tracker = 0;
  int64_t skipped_steps = 0;
};

// grads *= inv_scale; true when a result is inf or NaN (one rank's half of the check).
bool unscale_and_find_nonfinite(std::span<float> grads, float inv_scale);

class LossScaler {
 public:
  // std::invalid_argument naming the flag when a value is out of range.
  explicit LossScaler(const LossScalerConfig& config);

  float scale() const { return state_.scale; }
  const LossScalerState& state() const { return state_; }
  void set_state(const LossScalerState& s) { state_ = s; }

  // GradScaler's inv_scale: float(1 / double(S)).
  float inverse_scale() const { return static_cast<float>(1.0 / double(state_.scale)); }
  // Collective: one allreduce(max) of this rank's found-inf flag. Returns true (on every
  // rank) when some rank found one: the step must be skipped.
  bool agree_on_skip(bool found_inf_here, Communicator& comm) const;
  // Collective: grads *= 1/S on the host, then agree_on_skip.
  bool unscale_and_check(std::span<float> grads, Communicator& comm) const;
  // After the step (skipped or not): backoff or growth as GradScaler.update does.
  void update(bool found_inf);

 private:
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace dpt
