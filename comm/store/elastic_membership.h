#pragma once
// Elastic membership: which processes form the communicator of each generation,
// agreed through a Store that outlives every rank (tools/launch --elastic serves it).
//
// Terms:
//   id          a process's name for the whole job, given by its launcher
//               (DPT_ELASTIC_ID, e.g. "n0.l2.i1": node 0, local slot 2, incarnation 1).
//               A restarted process gets a new incarnation, so it is a new id.
//   generation  g = 0, 1, 2, ...: one membership and the communicator built for it.
//               Generation 0 is the job's start; every failure or join forms the next.
//   arrival     a process that wants to be in generation g registers in g's list
//               (an atomic counter and one key per arrival), then waits for the list
//               to close.
//   expected    who should arrive: the members of g-1 (every survivor of a failure
//               arrives once its communicator fails) plus processes that arrived to
//               join; for g = 0, the launcher's `max` processes.
//   dead        an id the launcher saw exit (key elastic/dead/<id>): it will never
//               arrive, so nobody waits for it.
//   closing     the list closes as soon as every expected id arrived or is dead, or
//               when `settle` has passed since this process arrived (a hung peer,
//               one behind a cut link) with at least `min` arrived. One closer wins
//               an atomic counter and writes the members; only members of g-1 close
//               (a joiner waits for them: they hold the state), unless every member of
//               g-1 is dead: then the joiners close, `settle` after seeing that, and
//               the new group resumes from the last checkpoint on disk.
//   rank order  survivors first, in the order of their ranks in g-1, then newcomers
//               by id; at most `max` members, the rest are excluded.
//   excluded    an arrival that is not in the closed list (it came too late, or the
//               group was full): it is not a member of g and must not talk to it; it
//               may try the next generation.
//   done        elastic/done: the members finished training; joiners still waiting
//               give up cleanly.
// Keys (all under "elastic/"): current, done, dead/<id>, g<g>/arrived, g<g>/arrival/<i>,
// g<g>/closed, g<g>/members.
#include <climits>
#include <string>
#include <vector>

#include "comm/error.h"
#include "comm/store/store.h"

namespace dpt {

struct ElasticLimits {
  int min = 1;
  int max = INT_MAX;
  Millis settle{std::chrono::seconds(10)};  // see "closing"
  Millis timeout{std::chrono::minutes(5)};  // how long a member waits for a list to close (a newcomer: no limit)
};

struct Membership {
  int generation = -1;
  std::vector<std::string> ids;  // by rank in this generation
  std::vector<int> prev_ranks;   // by rank: the rank in the previous generation, -1 for newcomers
  int rank = -1;                 // mine; -1: excluded
  std::vector<std::string> lost; // members of the previous generation that are not in this one
  int size() const { return int(ids.size()); }
  bool excluded() const { return rank < 0; }
};

// The generation could not form: fewer than `min` processes are left. Names them.
struct ElasticError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// This process was left out of the group (presumed lost while it was stopped or cut
// off) and, by the time it found out, the others had finished training: nothing failed,
// the job is done without it (train exits 0; its launcher must not fail the job).
struct ElasticFinishedWithout : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The exit status of a process started under launch --elastic that could not reach the
// rendezvous store at all (node 0's launcher, which serves it, has ended: the job is
// over). Its launcher does not restart the slot: a restart could reach nothing either.
constexpr int kExitStoreUnreachable = 69;  // sysexits' EX_UNAVAILABLE
struct ElasticStoreUnreachable : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The exit status of a member the others evicted (train --straggler-action evict: a
// persistent straggler). Its launcher does not restart the slot: a restart on the same
// core would be as slow, and the group re-formed without it on purpose.
constexpr int kExitEvicted = 79;
struct ElasticEvicted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ElasticRendezvous {
 public:
  ElasticRendezvous(Store& store, std::string my_id, ElasticLimits limits);

  const std::string& id() const { return id_; }
  const ElasticLimits& limits() const { return limits_; }

  // Arrives in generation `g` as a member of g-1 with rank `prev_rank` (-1: a newcomer,
  // which closes the list only when every member of g-1 is dead), waits until the list closes, returns it. A newcomer
  // still waiting when the job is done gets an excluded membership.
  // ElasticError when it closed with fewer than min members; TimeoutError (a member only)
  // when it did not close within limits.timeout: a newcomer waits until it is taken in,
  // the job is done, or the store is gone.
  Membership form(int g, int prev_rank);
  // The newest closed generation, -1 before generation 0 closed.
  int current();
  // True when some process arrived in generation g (a joiner waits there).
  bool arrivals_waiting(int g);
  void mark_done();
  bool done();
  // Launchers: `id` exited and will never arrive.
  static void mark_dead(Store& store, const std::string& id, const std::string& how);
  // This process leaves the job on its own (evicted): marked dead at once, so the others
  // close their next list without waiting for its launcher to see it exit.
  void leave(const std::string& how) { mark_dead(store_, id_, how); }

 private:
  Membership read_members(int g);
  bool try_close(int g, const std::vector<std::string>& expected);
  std::vector<std::string> expected_for(int g);
  std::string key(int g, const std::string& what) const;

  Store& store_;
  std::string id_;
  ElasticLimits limits_;
};

// One text line per member: "<id> <prev_rank>"; a list that could not form starts
// with "!" and says why.
std::string encode_members(const Membership& m);
Membership decode_members(const std::string& text, int generation);

}  // namespace dpt
