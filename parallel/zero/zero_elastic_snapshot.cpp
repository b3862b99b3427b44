#include "parallel/zero/zero_elastic_snapshot.h"

#include <algorithm>
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
                               size_t position) {
  ZeroSnapshot snap;
  snap.step = step;
  snap.epoch = epoch;
  snap.position = position;
  snap.layout = layout;
  snap.rank = comm.rank();
  const int n = comm.size();
  if (n > 1) {
    // Every rank sends to rank-1 and receives from rank+1: a ring shift of the shards.
    const int to = (snap.rank + n - 1) % n, from = (snap.rank + 1) % n;
    std::vector<float> out = flatten(own);
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
    // The neighbour's shard has the same buffer names and length S (padding included).
    const size_t len = layout.shard;
    if (in.size() != len * (1 + own.optimizer.size()))
      throw std::runtime_error("elastic snapshot: rank " + std::to_string(from) + " sent " + std::to_string(in.size()) +
                               " floats, expected " + std::to_string(len * (1 + own.optimizer.size())));
    ShardState& nb = snap.neighbour;
    nb.optimizer_steps = sizes_in[1];
    nb.params.assign(in.begin(), in.begin() + ptrdiff_t(len));
    size_t off = len;
    for (const auto& [name, v] : own.optimizer) {
      nb.optimizer.emplace_back(name, std::vector<float>(in.begin() + ptrdiff_t(off), in.begin() + ptrdiff_t(off + len)));
      off += len;
    }
  }
  snap.own = std::move(own);
  return snap;
}

FullState assemble_full_state(Communicator& comm, const ZeroSnapshot* snap, const ShardLayout& L,
                              const std::vector<std::string>& buffer_names, const std::vector<bool>& old_rank_alive) {
  const int n_old = L.world;
  if (int(old_rank_alive.size()) != n_old) throw std::logic_error("assemble_full_state: alive list of the wrong size");
  // Who provides old rank q's shard: q, else its ring predecessor (which holds q's copy).
  auto provider = [&](int q) {
    if (old_rank_alive[size_t(q)]) return q;
    const int p = (q + n_old - 1) % n_old;
    return old_rank_alive[size_t(p)] ? p : -1;
  };
  std::vector<int> lost;
  for (int q = 0; q < n_old; ++q)
    if (provider(q) < 0) lost.push_back(q);
  if (!lost.empty()) {
    std::string list;
    for (int q : lost) list += (list.empty() ? "" : ", ") + std::to_string(q);
    throw ElasticError("elastic ZeRO: the shard state of old rank(s) [" + list +
                       "] is gone (the rank and its ring neighbour, which held its copy, both died)");
  }
  FullState full;
  const size_t padded = L.padded();
  full.params.assign(padded, 0.0f);
  for (const auto& name : buffer_names) full.optimizer.emplace_back(name, std::vector<float>(padded, 0.0f));
  int64_t steps = 0;
  auto put = [&](const ShardState& s, int q) {
    const size_t b = L.begin(q);
    std::copy(s.params.begin(), s.params.end(), full.params.begin() + ptrdiff_t(b));
    if (s.optimizer.size() != full.optimizer.size())
      throw std::logic_error("elastic snapshot: " + std::to_string(s.optimizer.size()) + " state buffers, expected " +
                             std::to_string(full.optimizer.size()));
    for (size_t k = 0; k < s.optimizer.size(); ++k)
      std::copy(s.optimizer[k].second.begin(), s.optimizer[k].second.end(), full.optimizer[k].second.begin() + ptrdiff_t(b));
    steps = s.optimizer_steps;
  };
  if (snap) {  // a survivor (a newcomer provides nothing)
    const int me = snap->rank, next = (me + 1) % n_old;
    if (provider(me) == me) put(snap->own, me);
    if (n_old > 1 && provider(next) == me) put(snap->neighbour, next);
  }
  // One provider per element: the sums are the provided values, bit for bit.
  comm.allreduce(Buffer{full.params.data(), full.params.size(), DType::f32, {}}, ReduceOp::sum);
  for (auto& [name, v] : full.optimizer) comm.allreduce(Buffer{v.data(), v.size(), DType::f32, {}}, ReduceOp::sum);
  comm.allreduce(make_buffer(&steps, 1), ReduceOp::max);
  full.optimizer_steps = steps;
  full.params.resize(L.numel);
  for (auto& [name, v] : full.optimizer) v.resize(L.numel);
  return full;
}

}  // namespace dpt
