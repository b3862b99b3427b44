#include "comm/algorithms/registry.h"

#include <algorithm>
#include <stdexcept>

namespace dpt::algo {

// Every algorithm, one line each, by the name of the `Algorithm` its file defines. For
// each collective, `auto` takes the first listed whose auto_picks accepts: on 2 ranks
// recursive doubling up to thresholds.rd_max_bytes, else the tree up to
// thresholds.tree_max_bytes, else the ring.
#define DPT_ALGORITHMS(X)           \
  X(recursive_doubling_allreduce)   \
  X(tree_allreduce)                 \
  X(ring_allreduce)                 \
  X(ring_reduce_scatter)            \
  X(ring_allgather)                 \
  X(tree_broadcast)                 \
  X(tree_reduce)                    \
  X(linear_gather)                  \
  X(linear_scatter)                 \
  X(pairwise_alltoall)              \
  X(dissemination_barrier)

#define DPT_DECLARE(algorithm) extern const Algorithm algorithm;
DPT_ALGORITHMS(DPT_DECLARE)
#undef DPT_DECLARE

namespace {

const std::vector<const Algorithm*>& all() {
#define DPT_ADDRESS(algorithm) &algorithm,
  static const std::vector<const Algorithm*> list = {DPT_ALGORITHMS(DPT_ADDRESS)};
#undef DPT_ADDRESS
  return list;
}

}  // namespace

const Algorithm* find(CollKind kind, std::string_view name) {
  for (const Algorithm* a : all())
    if (a->kind == kind && name == a->name) return a;
  return nullptr;
}

const Algorithm& auto_pick(CollKind kind, const AutoInput& in) {
  for (const Algorithm* a : all())
    if (a->kind == kind && a->auto_picks(in)) return *a;
  throw std::logic_error(std::string("no algorithm registered for ") + coll_name(kind));
}

const Algorithm* find_any(std::string_view name) {
  for (const Algorithm* a : all())
    if (name == a->name) return a;
  return nullptr;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const Algorithm* a : all())
    if (std::find(out.begin(), out.end(), a->name) == out.end()) out.push_back(a->name);
  return out;
}

}  // namespace dpt::algo
