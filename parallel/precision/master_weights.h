#pragma once
// Mixed precision (train --precision bf16|fp16): 16-bit working weights, fp32 master
// weights.
//
// Terms:
//   working  the parameters the model reads and the ranks exchange: bf16 (or fp16)
//            values. They live in the model's fp32 flat buffer (the CPU kernels compute
//            in fp32), each rounded to the 16-bit format, and travel in it (half the bytes).
//   master   an fp32 copy of the slice the optimizer owns (the whole buffer in DDP,
//            this rank's shard in ZeRO). The optimizer steps the master; the working
//            slice is then round16(master). An update smaller than half a bf16 ulp
//            of its weight (most of them, at Adam's usual learning rates) is lost in
//            bf16 alone but accumulates in the master.
//   expose   working = master, in full precision, for a checkpoint: the model file
//            holds the master weights, so a resumed run (any precision, any world size)
//            continues from exactly them. round16 of the exposed buffer gives the
//            working values back bit for bit.
#include <cstddef>
#include <span>
#include <vector>

#include "comm/types.h"
#include "optim/optimizer.h"

namespace dpt {

class MasterWeights {
 public:
  // working: bf16 or f16 (std::invalid_argument otherwise).
  explicit MasterWeights(DType working);
  DType working_dtype() const { return working_; }
  // x = float(16-bit(x)) in place: the values a working copy holds.
  void round_working(std::span<float> x) const;
  // Takes working's full-precision values (initialisation, a checkpoint) as the
  // master, then rounds working in place to the working format.
  void adopt(std::span<float> working);
  // optimizer.step() on the master, then working = round16(master).
  void step(Optimizer& optimizer, std::span<float> working, std::span<const float> grads, float lr);
  void expose(std::span<float> working) const;
  std::span<const float> values() const { return master_; }
  size_t bytes() const { return master_.capacity() * sizeof(float); }

 private:
  void check(std::span<const float> working) const;
  DType working_;
  std::vector<float> master_;
};

}  // namespace dpt
