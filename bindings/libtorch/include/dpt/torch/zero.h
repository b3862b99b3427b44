// Optimizer state sharding for libtorch (ZeRO-1 and ZeRO-2), as PyTorch's
// ZeroRedundancyOptimizer does in Python, over dpt's communicators.
//
//   dpt::torch::DistributedDataParallel ddp(net, ctx);
//   dpt::torch::ZeroRedundancyOptimizer optimizer(ddp, [](std::vector<torch::Tensor> p) {
//     return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(1e-3));
//   }, {.stage = 2});
//   optimizer.zero_grad();  loss = ...(ddp.forward(x));  loss.backward();  optimizer.step();
//
// Terms:
//   shard     the parameters a rank owns: the wrapped module's parameters cut into
//             contiguous runs of registration order, one per rank, of about equal size
//             (a parameter is never split). `factory` builds the rank's optimizer over
//             its shard only, so its state (Adam's two moments) is 1/N of the whole.
//   step      the shard's optimizer steps its parameters; then each rank broadcasts its
//             shard (one broadcast per rank, each shard flattened per dtype), so every
//             rank ends with the same updated parameters.
//   stage 1   gradients are averaged everywhere (DDP's allreduce), each rank reads its
//             shard's.
//   stage 2   DDP reduces each bucket's gradients to their owners instead (a reduce per
//             run of one owner's parameters in the bucket) and releases the gradients a
//             rank does not own as soon as its bucket is done: .grad of another rank's
//             parameter is undefined after backward.
//   checkpoint  save(dir): every rank writes its shard's optimizer with torch::save
//             (dir/optim.rank<R>.pt) and rank 0 the partition (dir/optim.json); load(dir)
//             on any number of ranks re-cuts the state for the new shards (each rank
//             reads the old files its new shard overlaps: a file system every rank sees).
//             The module itself goes through torch::save / torch::load as usual.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/init.h"
#include "dpt/torch/ddp.h"

namespace dpt::torch {

struct ZeroOptions {
  int stage = 1;  // 1: optimizer state sharded; 2: + gradients reduced to their owners
};

class ZeroRedundancyOptimizer {
 public:
  using Factory = std::function<std::unique_ptr<::torch::optim::Optimizer>(std::vector<at::Tensor> shard)>;

  // Stage 1 over any parameters (every rank passes the same list, in the same order).
  ZeroRedundancyOptimizer(std::vector<at::Tensor> params, Factory factory, Context& ctx);
  // Stage 1 or 2 over a DistributedDataParallel's parameters.
  template <class M>
  ZeroRedundancyOptimizer(DistributedDataParallel<M>& ddp, Factory factory, const ZeroOptions& options = {})
      : ZeroRedundancyOptimizer(ddp.reducer(), ddp.parameters(), std::move(factory), options) {}
  ~ZeroRedundancyOptimizer();
  ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
  ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

  void zero_grad();  // every parameter's gradient, not only the shard's (set to none)
  void step();
  // Collective: writes / reads the checkpoint described above.
  void save(const std::string& dir) const;
  void load(const std::string& dir);

  ::torch::optim::Optimizer& shard_optimizer();
  int owner_of(size_t param_index) const;  // in the order the parameters were given
  size_t shard_size() const;               // parameters this rank owns
  int64_t state_bytes() const;             // this rank's optimizer state tensors, in bytes
  int stage() const;

  struct Impl;

 private:
  ZeroRedundancyOptimizer(Reducer& reducer, std::vector<at::Tensor> params, Factory factory, const ZeroOptions& options);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpt::torch
