#include "parallel/parallel_strategy.h"
#include "parallel/ranks_differing.h"

#include <limits>
#include <stdexcept>
#include <vector>

#include "parallel/optimizer_shards.h"
#include "parallel/precision/loss_scaler.h"

namespace dpt {

namespace {
uint64_t fnv1a(std::span<const float> values) {
  const auto* p = reinterpret_cast<const unsigned char*>(values.data());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < values.size_bytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
}  // namespace

std::string ranks_differing(Communicator& comm, uint64_t mine, int root) {
  std::vector<uint64_t> all(size_t(comm.size()));
  comm.allgather(make_buffer(reinterpret_cast<int64_t*>(&mine), 1),
                 make_buffer(reinterpret_cast<int64_t*>(all.data()), all.size()));
  std::string bad;
  for (int r = 0; r < comm.size(); ++r)
    if (all[size_t(r)] != all[size_t(root)]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  return bad;
}

void broadcast_verified(Communicator& comm, std::span<float> params, const std::string& who, int root) {
  comm.broadcast(Buffer{params.data(), params.size(), DType::f32, {}}, root);
  const std::string bad = ranks_differing(comm, fnv1a(params), root);
  if (!bad.empty())
    throw std::runtime_error(who + ": after broadcasting rank " + std::to_string(root) + "'s parameters, ranks [" + bad +
                             "] hold different bytes (checksum mismatch)");
}

bool broadcast_where_differs(Communicator& comm, std::span<float> params, const std::string& who, int root) {
  // Every rank learns the same list from the allgather, so all take the same branch.
  if (ranks_differing(comm, fnv1a(params), root).empty()) return false;
  broadcast_verified(comm, params, who, root);
  return true;
}

std::string ranks_with_other_values(Communicator& comm, std::span<const float> values, int root) {
  return ranks_differing(comm, fnv1a(values), root);
}

void verify_same_parameters(Communicator& comm, uint64_t fingerprint, const std::string& who) {
  const std::string bad = ranks_differing(comm, fingerprint, 0);
  if (!bad.empty())
    throw std::runtime_error(who + ": ranks [" + bad + "] built different parameters from rank 0's (fingerprint " +
                             "mismatch: a different --seed, --init-from or --resume file on those ranks?)");
}

void ParallelStrategy::broadcast_buffers() {
  // One rank has nothing to take; asking for the host view would also bring a CUDA
  // model's buffers down (and up again) every step for nothing.
  Communicator& group = gradient_group();
  if (group.size() == 1) return;
  auto b = model_.flat_buffers();
  if (!b.empty()) group.broadcast(Buffer{b.data(), b.size(), DType::f32, {}}, 0);
}

bool ParallelStrategy::unscale_owned_grads(float inv_scale) {
  return unscale_and_find_nonfinite(owned_grads(), inv_scale);
}

void ParallelStrategy::poison_owned_grad() {
  const std::span<float> g = owned_grads();
  if (!g.empty()) g[0] = std::numeric_limits<float>::infinity();
}

void ParallelStrategy::load_optimizer_state(const std::string& model_path) {
  // The overlapping slices of whatever the checkpoint holds: one full file (DDP, or
  // consolidated) or the shard files of a ZeRO run at any world size.
  const OptimizerRange r = optimizer_range();
  load_optimizer_range(model_path, *optimizer_, r.offset, r.count);
}

CarriedStatePtr ParallelStrategy::carry_out() {
  throw std::logic_error(name() + ": elastic re-forming is not supported by this strategy");
}

void ParallelStrategy::carry_in(const CarriedStatePtr&) {
  throw std::logic_error(name() + ": elastic re-forming is not supported by this strategy");
}

ElasticProgress ParallelStrategy::adopt_group_state(const GroupChange&) {
  throw std::logic_error(name() + ": elastic re-forming is not supported by this strategy");
}

void ParallelStrategy::count_optimizer_state(ModelStateBytes& m, size_t master_bytes) const {
  size_t state = 0;
  for (auto& [name, span] : optimizer_->state_buffers()) state += span.size_bytes();
  // Mixed precision: the fp32 master belongs to the optimizer state (the ZeRO paper's
  // K = 12 for mixed-precision Adam).
  m.master = master_bytes;
  state += master_bytes;
  m.optimizer = state;
  m.state_per_param = double(state) / double(std::max<size_t>(1, optimizer_->numel()));
}

}  // namespace dpt
