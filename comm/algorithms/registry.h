#pragma once
// The algorithms the communicator can run, by collective and name. Adding one is a new
// file in this folder that defines an `Algorithm` (its name, its collective, its body,
// when `auto` takes it and, optionally, the size threshold `auto` compares against with
// the environment variable that sets it) and one line in registry.cpp's list. Nothing
// else names it: CMake compiles every file here, CommOptions::from_env reads its
// threshold's variable, `launch --print-env` (and so docs/environment.md's table) lists it, and
// every --algo help text is algo::help_text(). tests/comm/algo_registry_test.cpp fails
// when a file's Algorithm is missing from the list or docs/environment.md's table is stale.
//
// Terms:
//   Algorithm   - name (what --algo calls it; several collectives may share one, as the
//                 ring's allreduce, reduce-scatter and allgather do), the collective it
//                 implements, its body, `auto_picks`: whether `auto` takes it for a call
//                 of this size on this many ranks, and `threshold`.
//   threshold   - an algorithm's own size limit for `auto`: an environment variable
//                 (COMM_*_MAX_BYTES), its default and meaning. auto_picks sees its value
//                 (CommOptions::thresholds, from the variable or set in code) as
//                 AutoInput::max_bytes. Each variable belongs to one algorithm.
//   auto order  - for one collective, `auto` takes the first algorithm in the list of
//                 registry.cpp whose auto_picks accepts; the last one of each collective
//                 accepts everything.
// Every body is written on Communicator's point-to-point calls only (isend_internal /
// irecv_internal), so one implementation runs on every backend. Bodies run on the
// thread that runs the collective (comm/dispatch/collective_queue.h) and block until done;
// `a.tag` keeps one collective's messages apart from the next.
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

namespace dpt::algo {

struct Threshold {
  const char* env = nullptr;   // e.g. "COMM_TREE_MAX_BYTES"; null: the algorithm has none
  size_t default_bytes = 0;    // when neither the variable nor CommOptions sets it
  const char* meaning = "";    // one line for launch --print-env and docs/environment.md
};

struct AutoInput {
  size_t bytes;        // the whole buffer: the result's size (allgather: all ranks' parts
                       // together), reduce-scatter's input
  int world;
  size_t max_bytes;    // this algorithm's threshold (0 when it declares none); for the
                       // hierarchical algorithms, the size from which `auto` takes them
  int hosts = 1;       // the communicator's hosts (comm/launch/topology.h)
  int local_size = 0;  // ranks per host when every host has as many, else 0
  bool host_contiguous = true;  // each host's ranks are consecutive (block numbering)
};

struct Algorithm {
  const char* name;
  CollKind kind;
  void (*run)(Communicator& c, const CollArgs& a);
  bool (*auto_picks)(const AutoInput& in);
  Threshold threshold = {};
};

// For auto_picks of an algorithm that is its collective's last resort (or only one).
inline bool always(const AutoInput&) { return true; }
// For auto_picks of an algorithm taken for messages up to its threshold.
inline bool up_to_threshold(const AutoInput& in) { return in.bytes <= in.max_bytes; }
// The tree's: up to the threshold on one host; across hosts up to a quarter of it, since
// every level of the tree sends the whole buffer over a link where the ring sends a 1/P
// piece per step (4 emulated hosts x 2 at 1 Gbit/s: the tree 1.5x the ring's time at
// 256 KiB, 0.5x at 64 KiB).
inline bool up_to_threshold_per_hosts(const AutoInput& in) {
  return in.bytes <= (in.hosts > 1 ? in.max_bytes / 4 : in.max_bytes);
}
// For auto_picks of the hierarchical algorithms: several hosts of several ranks each,
// numbered other than in blocks (with block numbering the flat ring crosses each host's
// link once per step already), for messages from the threshold.
inline bool hierarchy_pays(const AutoInput& in) {
  return in.hosts > 1 && in.local_size > 1 && !in.host_contiguous && in.bytes >= in.max_bytes;
}
// For the hierarchical allreduce with block numbering too: there the flat ring sends
// 2 (P-1)/P of the buffer over each host's link and the hierarchy 2 (H-1)/H, so it pays
// where that is at least kHierarchyBlockSaving fewer bytes (4 hosts x 2: 14% fewer;
// 8 x 2: 6%, not enough to repay its extra passes through memory) and the buffer is at
// least kHierarchyBlockFactor times the threshold (256 KiB by default: below it the
// link's latency, not its bytes, dominates and the tree wins). Measured on 4 emulated
// hosts x 2 at 1 Gbit/s (bench/algo_auto.sh): hierarchical 0.81-0.89x the ring's time
// from 256 KiB to 64 MiB.
inline constexpr double kHierarchyBlockSaving = 0.10;
inline constexpr size_t kHierarchyBlockFactor = 4;
inline bool hierarchy_pays_allreduce(const AutoInput& in) {
  if (hierarchy_pays(in)) return true;
  if (in.hosts < 2 || in.local_size < 2 || !in.host_contiguous) return false;
  const double p = double(in.world), h = double(in.hosts);
  const double ring = (p - 1) / p, hierarchy = (h - 1) / h;  // per host, over 2 N
  return hierarchy <= (1.0 - kHierarchyBlockSaving) * ring && in.bytes >= kHierarchyBlockFactor * in.max_bytes;
}

// Every registered algorithm, in list order (the auto order).
const std::vector<const Algorithm*>& all();
// The identifier each is registered by in registry.cpp (the variable its file defines),
// in the same order; for the test that every file's Algorithm is listed.
const std::vector<std::string_view>& registered_symbols();
// The algorithm called `name` for `kind`, or null.
const Algorithm* find(CollKind kind, std::string_view name);
// Some algorithm called `name` (for any collective), or null.
const Algorithm* find_any(std::string_view name);
// The algorithm whose threshold is set by `env`, or null.
const Algorithm* find_threshold(std::string_view env);
// The one `auto` takes for `kind` (see "auto order"), each algorithm's threshold taken
// from `thresholds`.
const Algorithm& auto_pick(CollKind kind, size_t bytes, int world, const AlgoThresholds& thresholds,
                           const Topology& topology = Topology());
// Every registered name, once each, in list order.
std::vector<std::string> names();
// The collectives registered under `name`, in list order ("allreduce", "broadcast", ...).
std::vector<std::string> collectives_of(std::string_view name);

}  // namespace dpt::algo
