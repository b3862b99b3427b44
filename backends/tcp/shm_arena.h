#pragma once
// The collective arena of the tcp backend: one shared-memory object mapped by every rank
// of a communicator whose ranks all run on one host. The collectives of
// shm_collectives.h run in it directly on the communicator's worker thread: no frames,
// no progress-engine hand-offs, no copy through a per-pair ring.
//
// Terms:
//   slot     - per rank and parity, `slot_bytes` of data that only that rank writes.
//   round    - one slot's worth of a collective: write, barrier, read. Rounds alternate
//              between the two slots of each rank (parity = round % 2). A rank writes
//              its slot of round k+2 only after the barrier of round k+1, which every
//              rank passes only after it finished reading round k's slots, so no rank
//              ever overwrites what another still reads. The round count runs on across
//              collectives.
//   step     - per rank, in a cache line of its own: how many barriers it has entered.
//              barrier(): raise mine, then wait until every rank's is at least as large.
//              Ranks run the same collectives in the same order, so the counts agree.
//   waiting  - spin (pause, then sched_yield) for `spin`, then sleep in FUTEX_WAIT on
//              the late rank's step word (a shared futex works across processes); a rank
//              raising its step wakes that word's sleepers. Sleeps last at most 20 ms,
//              after which the waiter runs its check (deadline, dead or departed peer).
//   state    - per rank, in its step line: running, departed (its communicator shut
//              down cleanly) or failed (it gave up on a collective or was aborted), and
//              its process identity (comm/launch/process_identity.h), written before it says ok.
//              The arena's ranks need no connection to each other (the tcp backend
//              connects pairs on demand), so a waiter learns from these, not from a
//              closed socket, that the late rank will never come: a rank that departed,
//              failed, or whose process is gone ends every wait on it within
//              milliseconds.
//   fingerprint - per rank and parity, in the rank's step line: what collective (kind,
//              dtype, op, root, count) it runs, written before the first barrier of
//              the collective and read by every rank after it. The same parity rule as
//              the slots keeps a fingerprint from being overwritten while others read
//              it, so ranks whose collectives differ all stop with MismatchError
//              instead of computing garbage or waiting for the timeout.
//   setup    - store keys under "<prefix>/arena/", want and ok each exchanged through
//              one key that rank 0 gathers (comm/store/store_gather.h): want is "1" from
//              rank r when it has a shared-memory channel to every peer and
//              COMM_TCP_SHM_COLL is on; if every rank wants it, rank 0 creates the object
//              and sets seg ("<name> <nonce>", or "fail"), the others map it and say ok
//              (rank 0's ok: it made the object). The arena is used only when every rank
//              said ok, so all ranks decide alike; rank 0 unlinks the object once it has
//              gathered all verdicts (or on any error path).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "comm/launch/process_identity.h"
#include "comm/error.h"
#include "comm/store/store.h"

namespace dpt::tcp {

struct ArenaConfig {
  int rank = 0;
  int world = 1;
  bool enabled = true;               // COMM_TCP_SHM_COLL (and a channel to every peer)
  uint64_t slot_bytes = 256 << 10;   // COMM_TCP_SHM_SLOT_BYTES, a multiple of 4096
  std::chrono::microseconds spin{200};
  uint64_t job_id = 0;
  uint64_t comm_id = 0;
  std::string prefix;                // the communicator's store namespace
  Millis timeout{120000};
  ErrorContext ctx;
};

class ShmArena {
 public:
  ShmArena(void* base, size_t bytes, const ArenaConfig& cfg);
  ~ShmArena();
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  size_t slot_bytes() const { return slot_bytes_; }
  // `owner`'s slot of the current round.
  char* slot(int owner) const;
  void next_round() { ++round_; }

  // This rank's fingerprint for the current round, and another rank's (after a barrier).
  struct Fingerprint {
    uint64_t what = 0;   // kind | dtype << 8 | op << 16 | (root + 1) << 24
    uint64_t count = 0;
    bool operator==(const Fingerprint&) const = default;
  };
  void publish(const Fingerprint& f);
  Fingerprint published(int owner) const;

  enum class RankState : uint32_t { running = 0, departed = 1, failed = 2 };
  void set_state(RankState s);  // this rank's; failed is never changed back
  RankState state_of(int rank) const;
  ProcessLife life_of(int rank) const;  // one read of /proc (comm/launch/process_identity.h)
  int32_t pid_of(int rank) const;

  // Called while waiting on `late_rank`, at least every 20 ms; throws to give up.
  using Check = std::function<void(int late_rank)>;
  void barrier(const Check& check);

 private:
  void wait_for(int peer, uint32_t target, const Check& check);

  void* base_;
  size_t bytes_;
  int rank_, world_;
  size_t slot_bytes_;
  std::chrono::microseconds spin_;
  uint32_t step_ = 0;
  uint64_t round_ = 0;
};

// The bytes the arena of `world` ranks takes in /dev/shm.
size_t shm_arena_bytes(int world, uint64_t slot_bytes);

// Collective over all ranks: the arena, or null when any rank cannot or will not share
// one (then the collectives run as messages). Throws TimeoutError if a rank does not
// take part in time.
std::unique_ptr<ShmArena> setup_shm_arena(Store& store, const ArenaConfig& cfg);

}  // namespace dpt::tcp
