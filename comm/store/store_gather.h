#pragma once
// Every member's value to every member through the store in O(1) requests per member:
// each member sets its own key, the first member (the gatherer) reads them all and
// publishes them as one key, which every other member reads. The gatherer makes
// O(members) requests; nobody else more than two. This replaces the pattern "every rank
// gets every other rank's key", which at P ranks costs the store P(P-1) requests
// (docs/multihost.md, "Many ranks": 512 ranks on one host made 1.3 million at start-up).
#include <string>
#include <vector>

#include "comm/error.h"
#include "comm/store/store.h"

namespace dpt {

// `members`: the ranks taking part, in the same order on every member, `me` among them.
// Keys are `key` + "/" + member and `key` + "/all": `key` must be unique to this
// exchange (a communicator's prefix and the exchange's name). Returns the values in
// `members` order. Throws TimeoutError (from the store) when a member never sets its
// value within `timeout`; MismatchError when the gathered key is malformed.
std::vector<std::string> gather_through_store(Store& store, const std::string& key, const std::vector<int>& members,
                                              int me, const std::string& value, Millis timeout,
                                              const ErrorContext& ctx);

// The same over ranks 0..world-1 (rank 0 gathers).
std::vector<std::string> gather_through_store(Store& store, const std::string& key, int world, int me,
                                              const std::string& value, Millis timeout, const ErrorContext& ctx);

}  // namespace dpt
