// Data parallelism over a user's model, with PyTorch DistributedDataParallel's semantics:
//
//   dpt::Context ctx = dpt::init(argc, argv);
//   dpt::nn::Model model(net, {.seed = 0});
//   dpt::DistributedDataParallel ddp(model, ctx);            // rank 0's parameters everywhere
//   dpt::optim::SGD optimizer(ddp.parameters(), {.lr = 0.001f});
//   optimizer.zero_grad();
//   dpt::nn::Loss loss = dpt::nn::mse_loss(ddp.forward(x), y);
//   ddp.backward(loss);                                      // gradients averaged over the ranks
//   optimizer.step();
//
// Every wrapper (DDP, ZeRO 1/2/3, DiLoCo) has this shape:
//   constructor  collective: checks that every rank built the same model (names and
//                shapes; std::runtime_error naming the rank that differs), then gives every
//                rank rank 0's parameters and buffers, verified by checksum.
//   forward      training mode: the buffers of rank 0 first (PyTorch's broadcast_buffers),
//                when the previous backward synchronised. Must be followed by backward.
//   backward     the model's backward; gradients are averaged in buckets launched as they
//                become ready, overlapping the rest of the backward (ZeRO-2/3: reduced to
//                their owners; DiLoCo: within the inner group).
//   no_sync()    a guard under which backward accumulates locally (gradient accumulation);
//                the next backward outside it averages the sum.
//   step         through an optimizer over parameters(), which refuses gradients that
//                were never averaged (dpt/optim.h). The first step also checks that the
//                parameters are still equal across the ranks (a checkpoint loaded on one
//                rank after wrapping: std::runtime_error naming the rank).
//   backend      Context::switch_backend between steps moves every wrapper to the new
//                communicator.
#pragma once

#include <memory>
#include <string>

#include "dpt/init.h"
#include "dpt/nn.h"
#include "dpt/parameters.h"

namespace dpt {

struct DdpOptions {
  double bucket_cap_mb = 25;       // PyTorch's bucket_cap_mb
  double first_bucket_mb = 1;      // the first (last-layer) bucket, small to start early
  bool overlap = true;             // launch buckets during backward
  bool broadcast_buffers = true;   // PyTorch's broadcast_buffers
  std::string gradient_dtype = "f32";  // "bf16" / "f16": averaged in 16 bits on the wire
};

struct ZeroOptions {
  int stage = 1;                   // 1: optimizer state sharded; 2: + gradients; 3: + parameters
  double bucket_cap_mb = 25;
  bool overlap = true;
  bool broadcast_buffers = true;
};

struct DiLoCoOptions {
  int inner_steps = 50;            // H: local steps between outer steps
  float outer_lr = 0.7f;
  float outer_momentum = 0.9f;     // Nesterov
  int group_size = 0;              // ranks per inner group (0: the ranks of one host)
  int overlap_steps = 0;           // the outer exchange overlaps this many inner steps
  std::string outer_dtype = "f32"; // pseudo-gradient on the wire: f32, bf16, f16
  bool broadcast_buffers = true;   // within the inner group
};

class DataParallel {
 public:
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;
  virtual ~DataParallel();

  const nn::Tensor& forward(const nn::Tensor& x);
  const nn::Tensor& forward(const std::vector<nn::Tensor>& inputs) { return forward(nn::Tensor::concat_samples(inputs)); }
  void backward(const nn::Loss& loss);

  // While the guard lives, backward accumulates without communicating.
  class NoSync {
   public:
    NoSync(NoSync&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    NoSync(const NoSync&) = delete;
    ~NoSync();

   private:
    friend class DataParallel;
    explicit NoSync(DataParallel* owner) : owner_(owner) {}
    DataParallel* owner_;
  };
  [[nodiscard]] NoSync no_sync();

  ParameterSet parameters();
  nn::Model& module() { return model_; }
  Context& context() { return ctx_; }
  std::string strategy() const;  // "DDP", "ZeRO-2", "DiLoCo"

  struct Impl;

 protected:
  DataParallel(nn::Model& model, Context& ctx, std::unique_ptr<Impl> impl);

 private:
  nn::Model& model_;
  Context& ctx_;
  std::unique_ptr<Impl> impl_;
};

class DistributedDataParallel : public DataParallel {
 public:
  DistributedDataParallel(nn::Model& model, Context& ctx, const DdpOptions& options = {});
};

class ZeroDataParallel : public DataParallel {
 public:
  ZeroDataParallel(nn::Model& model, Context& ctx, const ZeroOptions& options);
};

class DiLoCo : public DataParallel {
 public:
  DiLoCo(nn::Model& model, Context& ctx, const DiLoCoOptions& options);
};

}  // namespace dpt
