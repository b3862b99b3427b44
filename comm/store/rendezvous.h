#pragma once
// Rendezvous: every rank announces itself in a Store and waits until all `world` ranks
// have. Works over any Store (TCP or MPI-backed).
//
// Keys, all under `prefix` (so several communicators can meet in one store):
//   <prefix>/rank/<r>     counter: how many processes claimed rank r (1 is right)
//   <prefix>/world        world size as rank 0 sees it
//   <prefix>/duplicate    set by a process that found its rank already taken
//   <prefix>/joined       set by rank 0 once every rank's key is there (the others wait
//                         on it alone: O(1) keys per rank, not P)
#include <functional>
#include <string>

#include "comm/error.h"
#include "comm/store/store.h"

namespace dpt {

// Throws:
//   TimeoutError  "k of N ranks joined after T s, missing ranks [...]"
//   UsageError    a rank claimed twice (two processes with the same RANK), or a rank
//                 outside [0, world)
//   MismatchError ranks disagree about the world size
//   PeerError     `gone` says a rank that has not arrived never will (an elastic
//                 job's launcher saw the process exit): no use waiting out the timeout
// `ctx` supplies rank/backend for error messages.
void rendezvous(Store& store, const std::string& prefix, int rank, int world, Millis timeout,
                ErrorContext ctx = {}, const std::function<bool(int rank)>& gone = {});

// Said by a process that found `rank` taken before the rendezvous (its published address
// under <prefix>/addr/<r> is write-once in the tcp store, and another process's is
// there): records <prefix>/duplicate so the others fail at once too, and throws the
// rendezvous's UsageError.
[[noreturn]] void report_duplicate_rank(Store& store, const std::string& prefix, int rank, ErrorContext ctx);

// "[0, 2, 5-7]": compact list of ranks for error messages.
std::string format_rank_list(const std::vector<int>& ranks);

}  // namespace dpt
