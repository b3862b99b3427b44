#include "comm/algorithms/registry.h"

#include <algorithm>
#include <stdexcept>

namespace dpt::algo {

// Every algorithm, one line each, by the name of the `Algorithm` its file defines. For
// each collective, `auto` takes the first listed whose auto_picks accepts: on 2 ranks
// recursive doubling up to its threshold (COMM_RD_MAX_BYTES); on several hosts with
// several ranks each, the hierarchical algorithm from its threshold
// (COMM_HIERARCHICAL_MIN_BYTES; reduce-scatter, allgather and broadcast have their own);
// else the tree up to its own (COMM_TREE_MAX_BYTES), else
// the ring. Thresholds appear in launch --print-env in
// this order.
#define DPT_ALGORITHMS(X)           \
  X(recursive_doubling_allreduce)   \
  X(hierarchical_allreduce)         \
  X(tree_allreduce)                 \
  X(ring_allreduce)                 \
  X(hierarchical_reduce_scatter)    \
  X(ring_reduce_scatter)            \
  X(hierarchical_allgather)         \
  X(ring_allgather)                 \
  X(hierarchical_broadcast)         \
  X(tree_broadcast)                 \
  X(tree_reduce)                    \
  X(linear_gather)                  \
  X(linear_scatter)                 \
  X(pairwise_alltoall)              \
  X(dissemination_barrier)

#define DPT_DECLARE(algorithm) extern const Algorithm algorithm;
DPT_ALGORITHMS(DPT_DECLARE)
#undef DPT_DECLARE

const std::vector<const Algorithm*>& all() {
#define DPT_ADDRESS(algorithm) &algorithm,
  static const std::vector<const Algorithm*> list = {DPT_ALGORITHMS(DPT_ADDRESS)};
#undef DPT_ADDRESS
  return list;
}

const std::vector<std::string_view>& registered_symbols() {
#define DPT_SYMBOL(algorithm) #algorithm,
  static const std::vector<std::string_view> list = {DPT_ALGORITHMS(DPT_SYMBOL)};
#undef DPT_SYMBOL
  return list;
}

const Algorithm* find(CollKind kind, std::string_view name) {
  for (const Algorithm* a : all())
    if (a->kind == kind && name == a->name) return a;
  return nullptr;
}

const Algorithm* find_any(std::string_view name) {
  for (const Algorithm* a : all())
    if (name == a->name) return a;
  return nullptr;
}

const Algorithm* find_threshold(std::string_view env) {
  for (const Algorithm* a : all())
    if (a->threshold.env && env == a->threshold.env) return a;
  return nullptr;
}

const Algorithm& auto_pick(CollKind kind, size_t bytes, int world, const AlgoThresholds& thresholds,
                           const Topology& topology) {
  for (const Algorithm* a : all()) {
    if (a->kind != kind) continue;
    const size_t max_bytes = a->threshold.env ? thresholds.get(a->threshold) : 0;
    if (a->auto_picks(AutoInput{bytes, world, max_bytes, topology.hosts(), topology.uniform_local_size(),
                                  topology.host_contiguous()})) return *a;
  }
  throw std::logic_error(std::string("no algorithm registered for ") + coll_name(kind));
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const Algorithm* a : all())
    if (std::find(out.begin(), out.end(), a->name) == out.end()) out.push_back(a->name);
  return out;
}

std::vector<std::string> collectives_of(std::string_view name) {
  std::vector<std::string> out;
  for (const Algorithm* a : all())
    if (name == a->name) out.push_back(coll_name(a->kind));
  return out;
}

}  // namespace dpt::algo

// ---- AlgoThresholds (comm/communicator.h): values by variable, defaults from the registry ----

namespace dpt {

namespace {

// Every variable a registered algorithm declares, for error messages.
std::string registered_thresholds() {
  std::string out;
  for (const algo::Algorithm* a : algo::all())
    if (a->threshold.env) out += std::string(out.empty() ? "" : ", ") + a->threshold.env;
  return out.empty() ? "none" : out;
}

const algo::Threshold& registered(std::string_view env) {
  if (const algo::Algorithm* a = algo::find_threshold(env)) return a->threshold;
  throw std::invalid_argument("no registered algorithm has the threshold '" + std::string(env) +
                              "'; registered: " + registered_thresholds());
}

}  // namespace

void AlgoThresholds::set(std::string_view env, size_t bytes) {
  const algo::Threshold& t = registered(env);
  for (auto& [name, value] : values_)
    if (name == t.env) {
      value = bytes;
      return;
    }
  values_.emplace_back(t.env, bytes);
}

size_t AlgoThresholds::get(std::string_view env) const { return get(registered(env)); }

size_t AlgoThresholds::get(const algo::Threshold& t) const {
  for (const auto& [name, value] : values_)
    if (name == t.env || std::string_view(name) == t.env) return value;
  return t.default_bytes;
}

}  // namespace dpt
