#pragma once
// The algorithms the communicator can run, by collective and name. Adding one is a new
// file in this folder that defines an `Algorithm` (its body and when `auto` takes it)
// and one line in registry.cpp's list.
//
// Terms:
//   Algorithm   - name (what --algo calls it; several collectives may share one, as the
//                 ring's allreduce, reduce-scatter and allgather do), the collective it
//                 implements, its body, and `auto_picks`: whether `auto` takes it for a
//                 call of this size on this many ranks.
//   auto order  - for one collective, `auto` takes the first algorithm in the list of
//                 registry.cpp whose auto_picks accepts; the last one of each collective
//                 accepts everything.
// Every body is written on Communicator's point-to-point calls only (isend_internal /
// irecv_internal), so one implementation runs on every backend. Bodies run on the
// thread that runs the collective (comm/collective_queue.h) and block until done;
// `a.tag` keeps one collective's messages apart from the next.
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

namespace dpt::algo {

struct AutoInput {
  size_t bytes;  // the result's size (allgather: all ranks' parts together)
  int world;
  const AlgoThresholds& thresholds;
};

struct Algorithm {
  const char* name;
  CollKind kind;
  void (*run)(Communicator& c, const CollArgs& a);
  bool (*auto_picks)(const AutoInput& in);
};

// For auto_picks of an algorithm that is its collective's last resort (or only one).
inline bool always(const AutoInput&) { return true; }

// The algorithm called `name` for `kind`, or null.
const Algorithm* find(CollKind kind, std::string_view name);
// Some algorithm called `name` (for any collective), or null.
const Algorithm* find_any(std::string_view name);
// The one `auto` takes for `kind` (see "auto order").
const Algorithm& auto_pick(CollKind kind, const AutoInput& in);
// Every registered name, once each, in list order.
std::vector<std::string> names();

}  // namespace dpt::algo
