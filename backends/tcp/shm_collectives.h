#pragma once
// Collectives of the tcp backend inside the shared-memory arena (shm_arena.h), for a
// communicator whose ranks all share one host. They are the backend's `native`
// collectives, and `auto` picks them whenever the arena exists.
//
// Terms (slot, round, barrier: shm_arena.h):
//   piece    - the elements one round moves: at most a slot's worth per rank.
//   portion  - allreduce/reduce: the piece is cut into `world` portions (64-byte
//              aligned); rank j reduces portion j over every rank's slot, in place in
//              its own slot, so each element is reduced exactly once and every rank
//              reads the same bits.
// Per round:
//   allreduce / reduce   write my piece (all portions but mine, which stays in my send
//                        buffer until I reduce it) | barrier | reduce my portion into my
//                        slot | barrier | copy every portion out (reduce: the root only)
//   reduce_scatter       write, for each other rank j, the piece of j's block |
//                        barrier | reduce my block's piece from my send buffer and every
//                        other slot straight into recv
//   allgather            write my piece | barrier | copy every rank's piece out
//   broadcast            the root writes | barrier | the others copy out
//   barrier              one arena barrier (a round of its own)
// Each collective's first barrier also compares the ranks' fingerprints (shm_arena.h).
// Bytes per rank, allreduce of S bytes on n ranks: write S(n-1)/n, reduce reads S,
// copy out S: about half the memory traffic of a ring through per-pair rings, and no
// thread hand-offs. `avg` reduces as a sum and divides each result once.
#include <memory>

#include "backends/tcp/progress_engine.h"
#include "backends/tcp/shm_arena.h"
#include "comm/communicator.h"

namespace dpt::tcp {

class ShmCollectives {
 public:
  // `engine` tells the waits about dead and departed peers; it outlives this object.
  ShmCollectives(std::unique_ptr<ShmArena> arena, const ProgressEngine& engine, ErrorContext ctx);

  static bool supports(const CollArgs& a);
  // What the other ranks' waits learn about this one (shm_arena.h, "state"): it shut
  // its communicator down, or it was aborted.
  void mark_departed() { arena_->set_state(ShmArena::RankState::departed); }
  void mark_failed() { arena_->set_state(ShmArena::RankState::failed); }
  // Runs `a` on the calling thread; throws TimeoutError / PeerError / AbortedError.
  void run(const CollArgs& a, Millis timeout);

 private:
  void reduce_all(const CollArgs& a, bool everyone_gets_it);
  void reduce_scatter(const CollArgs& a);
  void allgather(const CollArgs& a);
  void broadcast(const CollArgs& a);
  void barrier();
  void check(int late_rank);
  void check_late_rank(int late_rank);
  // The arena barrier; the collective's first one also compares fingerprints.
  void round_barrier();

  std::unique_ptr<ShmArena> arena_;
  const ProgressEngine& engine_;
  ErrorContext ctx_;
  ShmArena::Check check_;
  std::chrono::steady_clock::time_point deadline_;
  Millis timeout_{0};
  const char* op_ = "";
  bool compare_pending_ = false;
  // The late rank's process is looked up in /proc at most this often while waiting.
  std::chrono::steady_clock::time_point next_life_check_{};
};

}  // namespace dpt::tcp
