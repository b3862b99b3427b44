#pragma once
// device_steps: the optimizers' and gradient clipping's passes over device memory (CUDA
// device pointers on the current device, the kernel stream of device/runtime.h), for
// DDP's device-resident mode (docs/gpu.md). One kernel per pass over the flat buffers
// (the store is one allocation, so "multi-tensor" is one launch). The per-element
// formulas are optim/update_rules.h's, built without FMA contraction: a step gives the
// CPU loop's bits. Implemented by device_steps.cu, or device_steps_absent.cpp in a
// build without CUDA (each raises device/'s "no CUDA" error; nothing reaches them there).
#include <cstddef>

#include "optim/update_rules.h"

namespace dpt::gpu {

// Adam (l2: weight decay added to the gradient) or AdamW (decoupled) over n elements.
void adam_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, size_t n, const AdamScalars& s,
               bool l2, bool decoupled);
// SGD; momentum_buffer may be null without momentum. first: the first step (torch's
// buffer starts at d).
void sgd_step(float* params, const float* grads, float* momentum_buffer, size_t n, const SgdScalars& s, bool decay,
              bool momentum, bool first, bool nesterov);
// Sum of squares in double, the same value every call for the same data (partial sums
// per block in a fixed order, then one block adds them); waits for the result.
double squared_norm(const float* x, size_t n);
// x *= factor.
void scale(float* x, size_t n, float factor);
// x *= factor, and whether any result is inf or NaN: fp16's unscale (the loss scaler's
// found-inf check, as GradScaler's unscale_), one pass. Waits for the 4-byte verdict, the
// one host read of a device-resident step (GradScaler's step reads it too).
bool scale_and_find_nonfinite(float* x, size_t n, float factor);

}  // namespace dpt::gpu
