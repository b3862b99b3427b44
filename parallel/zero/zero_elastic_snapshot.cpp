#include "parallel/zero/zero_elastic_snapshot.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "comm/store/elastic_membership.h"
#include "parallel/chunked_p2p.h"

namespace dpt {

namespace {

// The snapshot exchange's user tags (below Communicator::kMaxUserTag).
constexpr int64_t kTagSizes = 7100, kTagData = 7101;

// All of a shard state as one float array (params, then each buffer), for one message.
std::vector<float> flatten(const ShardState& s) {
  std::vector<float> out(s.params);
  for (const auto& [name, v] : s.optimizer) out.insert(out.end(), v.begin(), v.end());
  return out;
}

}  // namespace

ZeroSnapshot exchange_snapshot(Communicator& comm, const ShardLayout& layout, ShardState own, int64_t step, int epoch,
                               size_t position, int generation, int replicas) {
  ZeroSnapshot snap;
  snap.step = step;
  snap.generation = generation;
  snap.epoch = epoch;
  snap.position = position;
  snap.layout = layout;
  snap.rank = comm.rank();
  const int n = comm.size();
  if (replicas < 1) throw std::invalid_argument("elastic snapshot: replicas must be at least 1, got " + std::to_string(replicas));
  const int copies = std::min(replicas, n - 1);
  std::vector<float> out = flatten(own);
  const size_t len = layout.shard, want = len * (1 + own.optimizer.size());
  for (int d = 1; d <= copies; ++d) {
    // Distance d: every rank sends to rank-d and receives from rank+d, a ring shift of
    // the shards (each ordered pair of ranks occurs for one d only, so the tags can repeat).
    const int to = (snap.rank + n - d) % n, from = (snap.rank + d) % n;
    int64_t sizes_out[2] = {int64_t(out.size()), own.optimizer_steps}, sizes_in[2] = {0, 0};
    WorkPtr rs = comm.irecv(make_buffer(sizes_in, 2), from, kTagSizes);
    WorkPtr ss = comm.isend(make_buffer(sizes_out, 2), to, kTagSizes);
    ss->wait();
    rs->wait();
    std::vector<float> in(static_cast<size_t>(sizes_in[0]));
    // Chunked: a large model's shard and its optimizer state exceed one message's limit.
    std::vector<WorkPtr> works = irecv_chunked(comm, in.data(), in.size(), from, kTagData);
    for (auto& w : isend_chunked(comm, out.data(), out.size(), to, kTagData)) works.push_back(std::move(w));
    wait_all(works, comm);
    // The successor's shard has the same buffer names and length S (padding included).
    if (in.size() != want)
      throw std::runtime_error("elastic snapshot: rank " + std::to_string(from) + " sent " + std::to_string(in.size()) +
                               " floats, expected " + std::to_string(want));
    ShardState& c = snap.copies.emplace_back();
    c.optimizer_steps = sizes_in[1];
    c.params.assign(in.begin(), in.begin() + ptrdiff_t(len));
    size_t off = len;
    for (const auto& [name, v] : own.optimizer) {
      c.optimizer.emplace_back(name, std::vector<float>(in.begin() + ptrdiff_t(off), in.begin() + ptrdiff_t(off + len)));
      off += len;
    }
  }
  snap.own = std::move(own);
  return snap;
}

namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

// What each member says about the snapshot the group restores (one allgather).
struct HolderInfo {
  int64_t holds = 0, world = 0, replicas = 0, rank = -1, epoch = 0, position = 0;
};

std::string rank_list(const std::vector<int>& v) {
  std::string s;
  for (int q : v) s += (s.empty() ? "" : ", ") + std::to_string(q);
  return s;
}

}  // namespace

RestoredState restore_from_snapshots(Communicator& comm, const std::vector<const ZeroSnapshot*>& held, size_t numel,
                                     const std::vector<std::string>& buffer_names) {
  const int n = comm.size();
  // 1. Which snapshot: the oldest (step, generation) among the members' committed ones.
  int64_t mine[2] = {kNone, kNone};
  if (!held.empty() && held[0]) mine[0] = held[0]->step, mine[1] = held[0]->generation;
  std::vector<int64_t> keys(size_t(2 * n));
  comm.allgather(make_buffer(mine, 2), make_buffer(keys.data(), keys.size()));
  std::pair<int64_t, int64_t> key{kNone, kNone};
  for (int r = 0; r < n; ++r) key = std::min(key, {keys[size_t(2 * r)], keys[size_t(2 * r + 1)]});
  if (key.first == kNone) throw ElasticError("elastic ZeRO: no member of the new group holds a snapshot");
  // 2. Who holds it, as which rank of its world.
  const ZeroSnapshot* snap = nullptr;
  for (const ZeroSnapshot* h : held)
    if (h && h->step == key.first && h->generation == key.second) snap = h;
  HolderInfo me;
  if (snap) me = {1, snap->layout.world, int64_t(snap->copies.size()), snap->rank, snap->epoch, int64_t(snap->position)};
  std::vector<HolderInfo> info(static_cast<size_t>(n));
  static_assert(sizeof(HolderInfo) == 6 * sizeof(int64_t));
  comm.allgather(make_buffer(reinterpret_cast<int64_t*>(&me), 6), make_buffer(reinterpret_cast<int64_t*>(info.data()), 6 * size_t(n)));
  const std::string which = "the snapshot of step " + std::to_string(key.first) + " (generation " + std::to_string(key.second) + ")";
  int64_t world = 0, replicas = 0, epoch = 0, position = 0;
  for (int r = 0; r < n; ++r) {
    const HolderInfo& h = info[size_t(r)];
    if (!h.holds) {
      // A member that proposed a snapshot must hold the oldest one (see the header).
      if (keys[size_t(2 * r)] != kNone)
        throw ElasticError("elastic ZeRO: member " + std::to_string(r) + " holds a snapshot but not " + which);
      continue;
    }
    if (world && (h.world != world || h.replicas != replicas || h.epoch != epoch || h.position != position))
      throw std::logic_error("elastic ZeRO: the holders of " + which + " disagree on its world, replicas or position");
    world = h.world, replicas = h.replicas, epoch = h.epoch, position = h.position;
  }
  std::vector<int> holder_of(size_t(world), -1);  // snapshot rank -> member
  for (int r = 0; r < n; ++r) {
    const HolderInfo& h = info[size_t(r)];
    if (!h.holds) continue;
    if (h.rank < 0 || h.rank >= world || holder_of[size_t(h.rank)] >= 0)
      throw std::logic_error("elastic ZeRO: two members claim rank " + std::to_string(h.rank) + " of " + which);
    holder_of[size_t(h.rank)] = r;
  }
  // 3. Who provides each shard: the rank itself, else the nearest of its R predecessors.
  const int W = int(world), R = int(replicas);
  auto provider = [&](int q) {
    for (int d = 0; d <= R; ++d) {
      const int p = (q + W - d) % W;
      if (holder_of[size_t(p)] >= 0) return p;
    }
    return -1;
  };
  std::vector<int> lost;
  for (int q = 0; q < W; ++q)
    if (provider(q) < 0) lost.push_back(q);
  if (!lost.empty())
    throw ElasticError("elastic ZeRO: the shard state of old rank(s) [" + rank_list(lost) + "] is gone (the rank and the " +
                       std::to_string(R) + " rank(s) before it on the ring, which held its copies, all died)");
  // 4. Assemble: one provider per element, so the sums are the provided values, bit for bit.
  const ShardLayout L(numel, W);
  RestoredState out;
  out.step = key.first;
  out.epoch = int(epoch);
  out.position = size_t(position);
  const size_t padded = L.padded();
  out.params.assign(padded, 0.0f);
  for (const auto& name : buffer_names) out.optimizer.emplace_back(name, std::vector<float>(padded, 0.0f));
  int64_t steps = 0;
  auto put = [&](const ShardState& s, int q) {
    const size_t b = L.begin(q);
    if (s.params.size() != L.shard || s.optimizer.size() != out.optimizer.size())
      throw std::logic_error("elastic snapshot: a shard of " + std::to_string(s.params.size()) + " floats and " +
                             std::to_string(s.optimizer.size()) + " state buffers, expected " + std::to_string(L.shard) +
                             " and " + std::to_string(out.optimizer.size()));
    std::copy(s.params.begin(), s.params.end(), out.params.begin() + ptrdiff_t(b));
    for (size_t k = 0; k < s.optimizer.size(); ++k)
      std::copy(s.optimizer[k].second.begin(), s.optimizer[k].second.end(), out.optimizer[k].second.begin() + ptrdiff_t(b));
    steps = s.optimizer_steps;
  };
  if (snap) {
    const int me_q = snap->rank;
    if (provider(me_q) == me_q) put(snap->own, me_q);
    for (int d = 1; d <= R; ++d) {
      const int q = (me_q + d) % W;
      if (q != me_q && provider(q) == me_q) put(snap->copies[size_t(d - 1)], q);
    }
  }
  comm.allreduce(Buffer{out.params.data(), out.params.size(), DType::f32, {}}, ReduceOp::sum);
  for (auto& [name, v] : out.optimizer) comm.allreduce(Buffer{v.data(), v.size(), DType::f32, {}}, ReduceOp::sum);
  comm.allreduce(make_buffer(&steps, 1), ReduceOp::max);
  out.optimizer_steps = steps;
  out.params.resize(L.numel);
  for (auto& [name, v] : out.optimizer) v.resize(L.numel);
  return out;
}

}  // namespace dpt
