#include "backends/tcp/shm_collectives.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "comm/reduce_kernels.h"

namespace dpt::tcp {
namespace {

char* at(const Buffer& b, size_t element) { return static_cast<char*>(b.data) + element * dtype_size(b.dtype); }

// Portion j of a piece of `count` elements: whole 64-byte lines except the last.
struct Portions {
  size_t count, each;
  Portions(size_t count, int n, size_t esize) : count(count) {
    const size_t align = std::max<size_t>(1, 64 / esize);
    each = ((count + n - 1) / n + align - 1) / align * align;
  }
  size_t begin(int j) const { return std::min(count, each * size_t(j)); }
  size_t end(int j) const { return std::min(count, each * size_t(j + 1)); }
};

}  // namespace

ShmCollectives::ShmCollectives(std::unique_ptr<ShmArena> arena, const ProgressEngine& engine, ErrorContext ctx)
    : arena_(std::move(arena)), engine_(engine), ctx_(std::move(ctx)) {
  check_ = [this](int late) { check(late); };
}

bool ShmCollectives::supports(const CollArgs& a) {
  switch (a.kind) {
    case CollKind::allreduce:
    case CollKind::reduce:
    case CollKind::reduce_scatter:
    case CollKind::allgather:
    case CollKind::broadcast:
    case CollKind::barrier: return a.send.device.is_cpu() && a.recv.device.is_cpu();
    default: return false;
  }
}

void ShmCollectives::check(int late) {
  try {
    check_late_rank(late);
  } catch (...) {
    // This rank leaves the collective: its peers' waits on it end now, not at their timeout.
    mark_failed();
    throw;
  }
}

void ShmCollectives::check_late_rank(int late) {
  ErrorContext ctx = ctx_;
  ctx.op = op_;
  ctx.peer = late;
  if (engine_.has_failed()) {
    ProgressEngine::Failure f = engine_.failure();
    if (f.by_abort) throw AbortedError(ctx, f.detail);
    if (f.culprit >= 0) ctx.peer = f.culprit;
    throw PeerError(ctx, f.detail);
  }
  const ShmArena::RankState state = arena_->state_of(late);
  if (engine_.departed(late) || state == ShmArena::RankState::departed)
    throw PeerError(ctx, fmt::format("rank {} shut down its communicator while this rank waited for it in a "
                                     "shared-memory {}: did the ranks issue different collectives?",
                                     late, op_));
  if (state == ShmArena::RankState::failed)
    throw PeerError(ctx, fmt::format("rank {} gave up (its communicator failed or was aborted) while this rank waited "
                                     "for it in a shared-memory {}",
                                     late, op_));
  const auto now = std::chrono::steady_clock::now();
  if (now >= next_life_check_) {
    next_life_check_ = now + std::chrono::milliseconds(50);
    if (arena_->life_of(late) == ProcessLife::gone)
      throw PeerError(ctx, fmt::format("rank {} (pid {}) exited while this rank waited for it in a shared-memory {}: "
                                       "did it crash or get killed?",
                                       late, arena_->pid_of(late), op_));
  }
  if (now >= deadline_)
    throw TimeoutError(ctx, fmt::format("rank {} did not reach the shared-memory {}: timeout after {} ms (still computing, "
                                        "stopped, or in a different collective?)",
                                        late, op_, timeout_.count()));
}

// "allreduce(f32, 1000 elements, op sum)" from a fingerprint, for the mismatch message.
static std::string describe(const ShmArena::Fingerprint& f) {
  const auto kind = static_cast<CollKind>(f.what & 0xff);
  const auto t = static_cast<DType>((f.what >> 8) & 0xff);
  const auto op = static_cast<ReduceOp>((f.what >> 16) & 0xff);
  const int64_t root = int64_t(f.what >> 24) - 1;
  std::string s = fmt::format("{}({}, {} elements", coll_name(kind), dtype_name(t), f.count);
  if (kind == CollKind::allreduce || kind == CollKind::reduce || kind == CollKind::reduce_scatter)
    s += fmt::format(", op {}", reduce_op_name(op));
  if (kind == CollKind::reduce || kind == CollKind::broadcast) s += fmt::format(", root {}", root);
  return s + ")";
}

void ShmCollectives::round_barrier() {
  arena_->barrier(check_);
  if (!compare_pending_) return;
  compare_pending_ = false;
  const ShmArena::Fingerprint mine = arena_->published(arena_->rank());
  for (int j = 0; j < arena_->world(); ++j) {
    const ShmArena::Fingerprint theirs = arena_->published(j);
    if (theirs == mine) continue;
    ErrorContext ctx = ctx_;
    ctx.op = op_;
    ctx.peer = j;
    throw MismatchError(ctx, fmt::format("collective mismatch: this rank runs {} but rank {} runs {}; every rank must "
                                         "issue the same collectives with the same sizes in the same order",
                                         describe(mine), j, describe(theirs)));
  }
}

void ShmCollectives::run(const CollArgs& a, Millis timeout) {
  op_ = coll_name(a.kind);
  timeout_ = timeout;
  deadline_ = std::chrono::steady_clock::now() + timeout;
  // What every rank must agree on. Counts as the collective sees them: allreduce and
  // reduce the send count, reduce_scatter the block, allgather the piece per rank.
  ShmArena::Fingerprint f;
  const bool has_root = a.kind == CollKind::reduce || a.kind == CollKind::broadcast;
  f.what = uint64_t(a.kind) | uint64_t(a.recv.dtype) << 8 |
           uint64_t(a.kind == CollKind::broadcast || a.kind == CollKind::allgather ? 0 : int(a.op)) << 16 |
           uint64_t(has_root ? a.root + 1 : 0) << 24;
  f.count = a.kind == CollKind::reduce_scatter || a.kind == CollKind::broadcast ? a.recv.count
            : a.kind == CollKind::barrier                                          ? 0
                                                                                   : a.send.count;
  arena_->publish(f);
  compare_pending_ = true;
  switch (a.kind) {
    case CollKind::allreduce: return reduce_all(a, true);
    case CollKind::reduce: return reduce_all(a, false);
    case CollKind::reduce_scatter: return reduce_scatter(a);
    case CollKind::allgather: return allgather(a);
    case CollKind::broadcast: return broadcast(a);
    case CollKind::barrier: return barrier();
    default: throw std::logic_error("shm collectives: unsupported collective");
  }
}

void ShmCollectives::reduce_all(const CollArgs& a, bool everyone_gets_it) {
  ShmArena& ar = *arena_;
  const int n = ar.world(), me = ar.rank();
  const DType t = a.send.dtype;
  const size_t es = dtype_size(t), total = a.send.count, per_round = ar.slot_bytes() / es;
  const ReduceOp op = a.op == ReduceOp::avg ? ReduceOp::sum : a.op;
  const bool gets_it = everyone_gets_it || me == a.root;
  for (size_t off = 0; off < total; off += per_round) {
    const size_t c = std::min(per_round, total - off);
    const Portions parts(c, n, es);
    const char* src = at(a.send, off);
    char* mine = ar.slot(me);
    // My own portion is read by me only, from the send buffer.
    std::memcpy(mine, src, parts.begin(me) * es);
    std::memcpy(mine + parts.end(me) * es, src + parts.end(me) * es, (c - parts.end(me)) * es);
    round_barrier();

    const size_t b = parts.begin(me), len = parts.end(me) - b;
    if (len > 0) {
      char* dst = mine + b * es;
      bool first = true;
      for (int j = 0; j < n; ++j) {
        if (j == me) continue;
        const char* other = ar.slot(j) + b * es;
        if (first) reduce_pair(dst, src + b * es, other, len, t, op);
        else reduce_into(dst, other, len, t, op);
        first = false;
      }
      if (a.op == ReduceOp::avg) divide_in_place(dst, len, t, n);
    }
    ar.barrier(check_);

    if (gets_it) {
      char* out = at(a.recv, off);
      for (int j = 0; j < n; ++j)
        std::memcpy(out + parts.begin(j) * es, ar.slot(j) + parts.begin(j) * es, (parts.end(j) - parts.begin(j)) * es);
    }
    ar.next_round();
  }
}

void ShmCollectives::reduce_scatter(const CollArgs& a) {
  ShmArena& ar = *arena_;
  const int n = ar.world(), me = ar.rank();
  const DType t = a.recv.dtype;
  const size_t es = dtype_size(t), block = a.recv.count, per_round = ar.slot_bytes() / (es * size_t(n));
  const ReduceOp op = a.op == ReduceOp::avg ? ReduceOp::sum : a.op;
  for (size_t off = 0; off < block; off += per_round) {
    const size_t c = std::min(per_round, block - off);
    char* mine = ar.slot(me);
    // Slot layout of a round: the piece of every rank's block, at j * c.
    for (int j = 0; j < n; ++j)
      if (j != me) std::memcpy(mine + size_t(j) * c * es, at(a.send, size_t(j) * block + off), c * es);
    round_barrier();

    char* out = at(a.recv, off);
    const char* own = at(a.send, size_t(me) * block + off);  // may be `out` itself (in place)
    bool first = true;
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      const char* other = ar.slot(j) + size_t(me) * c * es;
      if (first) reduce_pair(out, own, other, c, t, op);
      else reduce_into(out, other, c, t, op);
      first = false;
    }
    if (a.op == ReduceOp::avg) divide_in_place(out, c, t, n);
    ar.next_round();
  }
}

void ShmCollectives::allgather(const CollArgs& a) {
  ShmArena& ar = *arena_;
  const int n = ar.world(), me = ar.rank();
  const size_t es = dtype_size(a.send.dtype), block = a.send.count, per_round = ar.slot_bytes() / es;
  const bool in_place = a.send.data == at(a.recv, size_t(me) * block);
  for (size_t off = 0; off < block; off += per_round) {
    const size_t c = std::min(per_round, block - off);
    std::memcpy(ar.slot(me), at(a.send, off), c * es);
    round_barrier();
    for (int j = 0; j < n; ++j) {
      if (j == me && in_place) continue;
      std::memcpy(at(a.recv, size_t(j) * block + off), j == me ? at(a.send, off) : ar.slot(j), c * es);
    }
    ar.next_round();
  }
}

void ShmCollectives::broadcast(const CollArgs& a) {
  ShmArena& ar = *arena_;
  const size_t es = dtype_size(a.recv.dtype), total = a.recv.count, per_round = ar.slot_bytes() / es;
  const bool root = ar.rank() == a.root;
  for (size_t off = 0; off < total; off += per_round) {
    const size_t c = std::min(per_round, total - off);
    if (root) std::memcpy(ar.slot(a.root), at(a.recv, off), c * es);
    round_barrier();
    if (!root) std::memcpy(at(a.recv, off), ar.slot(a.root), c * es);
    ar.next_round();
  }
}

void ShmCollectives::barrier() {
  round_barrier();
  arena_->next_round();  // a round of its own: the next collective's fingerprint goes to the other parity
}

}  // namespace dpt::tcp
