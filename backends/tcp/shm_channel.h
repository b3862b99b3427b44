#pragma once
// Shared-memory channels of the tcp backend: finding the peers on this host, one inbox
// (shm_ring.h's rings) per rank, and a channel per pair made of two of those rings.
//
// Terms:
//   host id  - comm/launch/host_identity.h: equal on two ranks means they may share memory.
//              Containers on one host share the boot id but maybe not /dev/shm, so
//              equality is only a hint: the pair confirms by mapping each other's inbox.
//   local ranks - the ranks with this rank's host id (itself included), in rank order;
//              a rank's local index is its place in that list. Every local rank reads
//              every host id, so all of them agree on the list.
//   inbox    - one POSIX shm object per rank, mapped by itself and every local peer: a
//              header page, one RingControl per local rank, then one ring per local rank
//              (the ring of sender s at its local index). Ring s->r lives in r's inbox,
//              so P ranks make P objects (not P(P-1)/2), and the object is sparse: only
//              the header and controls are reserved when it is made; a ring's pages are
//              reserved when its sender first writes (ShmChannel::reserve_out), so pairs
//              that never talk (every pair, when the collectives run in the arena) cost
//              no memory, and memory grows with the pairs that do.
//   ring size - chosen by the inbox's owner: COMM_TCP_SHM_RING_BYTES, or
//              COMM_TCP_SHM_INBOX_BYTES / (local ranks - 1) rounded down to a power of
//              two when smaller (at least 4096), so one rank's inbound rings never hold
//              more than the inbox budget even if every peer talks to it; halved again
//              while the rings of every local rank (L(L-1)) would not fit in what
//              /dev/shm has free beside the arena, so a ring's reservation can only fail
//              when something else fills /dev/shm (then the communicator fails, naming
//              it); when not even 4 KiB rings fit, the rank's pairs use TCP.
//   name     - comm/net/shm_names.h: "/dpt-<owner tag>-<job id>-<comm id>-inbox-<r>",
//              so one left behind by a dead rank is reclaimed (launch, the next job on
//              the host, `launch --cleanup-shm`); a random nonce in its header proves the
//              opener mapped its creator's object and not a stale one.
//   handshake (store keys under "<prefix>/shm", each exchanged through one gathered key:
//   comm/store/store_gather.h, O(1) requests per rank):
//     host         every rank's host id, or "off" when COMM_TCP_SHM=0 on that rank
//                  (rank 0 gathers)
//     inbox/h<L>   the ranks of the host whose lowest rank is L: "<name> <nonce>", or
//                  "fail" (L gathers)
//     mapped/h<L>  the same ranks, once each tried every local peer's inbox: the ranks
//                  whose inbox it could not map (normally none: a few bytes per rank).
//   A pair uses shared memory when both made their inbox and mapped the other's. Each
//   rank unlinks its own inbox once it has read its host's mapped/ (nobody will open it
//   any more), or on any error path; only a process killed in between leaves it.
#include <memory>
#include <string>
#include <vector>

#include "backends/tcp/shm_ring.h"
#include "comm/error.h"
#include "comm/store/store.h"

namespace dpt::tcp {

struct ShmSegment;  // one mapped inbox (shm_channel.cpp)

// One pair, seen from one rank: the ring it sends into (in the peer's inbox) and the
// ring it reads from (in its own).
class ShmChannel {
 public:
  // my_slot, peer_slot: the two ranks' local indices.
  ShmChannel(std::shared_ptr<ShmSegment> mine, std::shared_ptr<ShmSegment> theirs, int my_slot, int peer_slot);
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;
  ShmRing& out() { return out_; }
  ShmRing& in() { return in_; }
  // A failure notice for a peer this rank has no connection to (no abort frame can reach
  // it): written into the peer's inbox header, the first notice wins. failed_by(): the
  // rank that wrote one into this rank's inbox (any channel reads the same), or -1.
  void tell_failed(int my_rank);
  int failed_by() const;
  // The out ring's pages are reserved as the writes first reach them, in order (a ring
  // fills from its start before it wraps): "" once the next `upcoming` bytes are, else
  // why not (a full /dev/shm, where the write would die of SIGBUS).
  std::string reserve_out(size_t upcoming) {
    return out_reserved_ == out_bytes_ ? std::string() : reserve_more(upcoming);
  }

 private:
  std::shared_ptr<ShmSegment> mine_, theirs_;
  ShmRing out_, in_;
  char* out_data_ = nullptr;
  size_t out_bytes_ = 0;
  size_t out_reserved_ = 0;  // bytes from the ring's start whose pages are reserved

  std::string reserve_more(size_t upcoming);
};
using ShmChannelPtr = std::unique_ptr<ShmChannel>;

struct ShmConfig {
  int rank = 0;
  int world = 1;
  bool enabled = true;          // COMM_TCP_SHM
  uint64_t ring_bytes = 0;      // COMM_TCP_SHM_RING_BYTES, a power of two
  uint64_t inbox_bytes = 0;     // COMM_TCP_SHM_INBOX_BYTES
  uint64_t arena_bytes = 0;     // what the collective arena will take when every rank is local
  uint64_t job_id = 0;
  uint64_t comm_id = 0;
  std::string prefix;           // the communicator's store namespace
  Millis timeout{120000};
  ErrorContext ctx;
};

// The ring size an inbox of `local_ranks` ranks gets (see "ring size").
uint64_t inbox_ring_bytes(uint64_t ring_bytes, uint64_t inbox_bytes, int local_ranks);

// Collective over all ranks. Returns one entry per rank: a channel for each same-host
// peer that agreed, null for the others (and for this rank). Throws TimeoutError if a
// peer does not take part in time; falls back to TCP (logged) on any shm failure.
std::vector<ShmChannelPtr> setup_shm_channels(Store& store, const ShmConfig& cfg);

}  // namespace dpt::tcp
