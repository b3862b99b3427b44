#pragma once
// How ZeRO cuts the flat parameter/gradient buffer into per-rank shards.
//
// Terms:
//   P        numel, the model's parameter count (the flat buffer's real length).
//   N        world size.
//   S        shard, ceil(P / N): every rank owns exactly S elements.
//   padded   N * S >= P; the elements [P, N*S) are padding (ParamStore's slack),
//            always zero, so they never change (gradient 0 leaves SGD/Adam state 0).
//   owner    rank r owns the contiguous shard [r*S, (r+1)*S); its real part is the
//            prefix below P (the last ranks' shards may be short or even empty).
#include <algorithm>
#include <cstddef>

namespace dpt {

struct ShardLayout {
  size_t numel = 0;  // P
  int world = 1;     // N
  size_t shard = 0;  // S

  ShardLayout() = default;
  ShardLayout(size_t p, int n) : numel(p), world(n), shard((p + size_t(n) - 1) / size_t(n)) {}

  size_t padded() const { return shard * size_t(world); }
  size_t begin(int r) const { return size_t(r) * shard; }
  size_t end(int r) const { return begin(r) + shard; }
  // Elements of rank r's shard below P (what a checkpoint of that shard holds).
  size_t real_numel(int r) const { return std::min(numel, end(r)) - std::min(numel, begin(r)); }
  int owner(size_t i) const { return int(i / shard); }
};

}  // namespace dpt
