#pragma once
// What a data-parallel strategy is made from: the stage, the gradient buckets and their
// wire format, the working precision, and how to build the optimizer over what the
// strategy owns. Shared by every strategy (ddp/, zero/) and by the trainer that picks one.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "comm/types.h"
#include "optim/optimizer.h"

namespace dpt {

// Gradient buckets (bucket_plan.h) and how they travel: DDP's allreduce and ZeRO's
// reduces cut and launch them alike.
// --grad-compress powersgd (parallel/ddp/powersgd.h): rank 0 means off.
struct PowerSgdConfig {
  int rank = 0;             // R, the approximation rank
  int64_t start_step = 10;  // optimizer steps averaged uncompressed first (PyTorch's start_powerSGD_iter)
  uint64_t seed = 0;        // of the starting Q, the same on every rank
};

struct DdpConfig {
  size_t bucket_bytes = 25u << 20;
  size_t first_bucket_bytes = 1u << 20;
  bool overlap = true;
  DType wire = DType::f32;  // f32 (none), bf16 or f16
  // A model on CUDA with an f32 wire: reduce device buckets even where the backend
  // stages them (the path before host reduction was chosen; kept for measurements).
  bool force_device_buckets = false;
  // Device-resident training (--optimizer-device cuda, docs/gpu.md): parameters,
  // gradients and optimizer state stay on the GPU, buckets are device buffers (staged by
  // backends that take only host memory), the optimizer and clipping run as kernels, and
  // a step moves nothing over PCIe. Needs a model on CUDA, an f32 wire, no PowerSGD; at
  // bf16 the fp32 device parameters are the masters and only the products round (autocast).
  bool optimizer_on_device = false;
  PowerSgdConfig powersgd;  // DDP only, f32 wire, host buckets
};

// --strategy diloco (parallel/diloco/diloco_strategy.h, docs/diloco.md): inner groups
// train alone for H steps, then the groups average their pseudo-gradients and take one
// outer Nesterov step. inner_steps 0 means DiLoCo is off.
struct DilocoConfig {
  int inner_steps = 0;         // H
  float outer_lr = 0.7f;       // the paper's values
  float outer_momentum = 0.9f;  // Nesterov; 0: plain SGD on the pseudo-gradient
  DType outer_dtype = DType::f32;  // the pseudo-gradient on the wire: f32, bf16 or f16
  // Ranks per inner group (synchronous DDP among them): 0 = the ranks of one host
  // (comm/launch/topology.h), 1 = every rank its own worker, N = consecutive blocks of N.
  int group_size = 0;
  // 0: the exchange blocks at the round's end. D > 0: it runs during the next D inner
  // steps and is applied after them, keeping the D steps' progress (delayed outer step).
  int overlap_steps = 0;
};

// Builds the optimizer for `numel` elements (the strategy decides how many it owns).
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(size_t numel)>;

struct StrategyConfig {
  int zero_stage = 0;            // 0: DDP; 1, 2, 3: ZeRO
  DdpConfig ddp;                 // buckets, overlap, gradient wire dtype
  DType precision = DType::f32;  // f32, or bf16/f16: 16-bit working weights, fp32 masters
  DilocoConfig diloco;           // inner_steps > 0: DiLoCo (zero_stage must be 0)
};

}  // namespace dpt
