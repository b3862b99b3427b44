#include "comm/dispatch/collective_fingerprint.h"

#include <cstring>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "comm/algorithms/registry.h"
#include "comm/wire.h"

namespace dpt {

// Layout: u8 kind+1 | u8 op (0 none, else ReduceOp+1) | u8 dtype (0 none, else DType+1)
//         | u8 zero | i32 root | u64 count | i64 seq | u64 zero
namespace {
constexpr uint8_t kKinds = static_cast<uint8_t>(CollKind::barrier) + 1;
constexpr uint8_t kOps = static_cast<uint8_t>(ReduceOp::avg) + 1;
constexpr uint8_t kDTypes = static_cast<uint8_t>(DType::i64) + 1;

bool reduces(CollKind k) {
  return k == CollKind::allreduce || k == CollKind::reduce || k == CollKind::reduce_scatter;
}
bool rooted(CollKind k) {
  return k == CollKind::reduce || k == CollKind::broadcast || k == CollKind::gather || k == CollKind::scatter;
}
}  // namespace

CollectiveFingerprint CollectiveFingerprint::of(const CollArgs& a) {
  CollectiveFingerprint f;
  f.kind = static_cast<uint8_t>(a.kind) + 1;
  f.op = reduces(a.kind) ? static_cast<uint8_t>(a.op) + 1 : 0;
  f.root = rooted(a.kind) ? a.root : -1;
  f.seq = a.seq;
  switch (a.kind) {
    case CollKind::barrier: return f;
    case CollKind::reduce_scatter:
    case CollKind::scatter: f.count = a.recv.count; f.dtype = static_cast<uint8_t>(a.recv.dtype) + 1; break;
    default: f.count = a.send.count; f.dtype = static_cast<uint8_t>(a.send.dtype) + 1; break;
  }
  return f;
}

std::array<unsigned char, CollectiveFingerprint::kWireBytes> CollectiveFingerprint::encode() const {
  std::array<unsigned char, kWireBytes> out{};
  out[0] = kind;
  out[1] = op;
  out[2] = dtype;
  wire::store_u32(out.data() + 4, static_cast<uint32_t>(root));
  wire::store_u64(out.data() + 8, count);
  wire::store_u64(out.data() + 16, static_cast<uint64_t>(seq));
  return out;
}

CollectiveFingerprint CollectiveFingerprint::decode(const unsigned char* in) {
  CollectiveFingerprint f;
  f.kind = in[0];
  f.op = in[1];
  f.dtype = in[2];
  if (f.kind == 0 || f.kind > kKinds || f.op > kOps || f.dtype > kDTypes)
    throw std::invalid_argument(fmt::format("malformed collective fingerprint (kind {}, op {}, dtype {})", f.kind,
                                            f.op, f.dtype));
  f.root = static_cast<int32_t>(wire::load_u32(in + 4));
  f.count = wire::load_u64(in + 8);
  f.seq = static_cast<int64_t>(wire::load_u64(in + 16));
  return f;
}

std::string CollectiveFingerprint::str() const {
  std::string s = coll_name(static_cast<CollKind>(kind - 1));
  std::string inner;
  if (dtype) inner += fmt::format("{}, count {}", dtype_name(static_cast<DType>(dtype - 1)), count);
  if (op) inner += fmt::format(", op {}", reduce_op_name(static_cast<ReduceOp>(op - 1)));
  if (root >= 0) inner += fmt::format("{}root {}", inner.empty() ? "" : ", ", root);
  return s + "(" + inner + ") #" + std::to_string(seq);
}

int64_t fingerprint_tag(int64_t seq) {
  return Communicator::kMaxUserTag + 1 + (int64_t{1} << 30) + (seq % (int64_t{1} << 30));
}

void check_collective_fingerprints(Communicator& c, const CollArgs& a) {
  if (c.size() == 1) return;
  const CollectiveFingerprint mine = CollectiveFingerprint::of(a);
  auto bytes = mine.encode();
  std::vector<unsigned char> all(bytes.size() * size_t(c.size()));
  CollArgs g;
  g.kind = CollKind::allgather;
  g.send = make_buffer(bytes.data(), bytes.size());
  g.recv = make_buffer(all.data(), all.size());
  g.seq = a.seq;
  g.tag = fingerprint_tag(a.seq);
  algo::find(CollKind::allgather, Algo::ring.name())->run(c, g);
  // Every rank holds every fingerprint, so every rank reaches the same verdict and names
  // the same pair: the lowest rank whose fingerprint differs from rank 0's.
  std::vector<CollectiveFingerprint> fps;
  for (int r = 0; r < c.size(); ++r) {
    try {
      fps.push_back(CollectiveFingerprint::decode(all.data() + size_t(r) * bytes.size()));
    } catch (const std::invalid_argument& e) {
      throw MismatchError(c.context(coll_name(a.kind), r, a.seq), std::string("rank ") + std::to_string(r) +
                                                                       " sent a " + e.what());
    }
  }
  for (int r = 1; r < c.size(); ++r) {
    if (fps[r] == fps[0]) continue;
    int others = 0;
    for (int q = r + 1; q < c.size(); ++q) others += !(fps[q] == fps[0]);
    const int peer = c.rank() == r ? 0 : r;
    throw MismatchError(c.context(coll_name(a.kind), peer, a.seq),
                        fmt::format("collective mismatch: rank 0 issued {} but rank {} issued {}{} (this rank: {}); "
                                    "every rank must issue the same collectives in the same order",
                                    fps[0].str(), r, fps[r].str(),
                                    others ? fmt::format(" (and {} more rank(s) differ from rank 0)", others) : "",
                                    mine.str()));
  }
}

}  // namespace dpt
