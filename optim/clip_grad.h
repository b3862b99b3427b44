#pragma once
// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (norm_type 2).
// Terms: the *global norm* is the L2 norm of all gradients of the model taken together;
// the *clip coefficient* is min(1, max_norm / (global_norm + 1e-6)), and every gradient is
// multiplied by it. When gradients are sharded or bucketed across ranks, each rank computes
// squared_norm() of its part, the caller sums those across ranks (an allreduce), and passes
// the sum to the second clip_grad_norm overload.
#include <span>

namespace dpt {

// Sum of squares, accumulated in double.
double squared_norm(std::span<const float> x);

// min(1, max_norm / (total_norm + 1e-6)), computed as torch does.
float clip_coefficient(float max_norm, float total_norm);

// Clips `grads` in place to global norm max_norm and returns the norm before clipping.
// A non-finite norm makes the gradients non-finite too, as in torch
// (error_if_nonfinite=False); callers that want to skip such steps check the result.
float clip_grad_norm(std::span<float> grads, float max_norm);

// The same with the global squared norm already known (sum over all ranks and buffers);
// only `grads`, this caller's part, is scaled.
float clip_grad_norm(std::span<float> grads, float max_norm, double global_squared_norm);

}  // namespace dpt
