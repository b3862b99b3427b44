#pragma once
// Shared-memory channels of the tcp backend: finding the peers on this host and mapping
// one segment (shm_ring.h) per such pair.
//
// Terms:
//   host id  - comm/launch/host_identity.h: equal on two ranks means they may share memory.
//              Containers on one host share the boot id but maybe not /dev/shm, so
//              equality is only a hint: the pair confirms by mapping the segment.
//   segment name - "/dpt-<job id>-<comm id>-<i>-<j>" (i < j), unique per job and
//              communicator; a random nonce in its header proves the opener mapped
//              the creator's object and not a stale one.
//   handshake (store keys under "<prefix>/shm"):
//     host/<r>      rank r's host id, or "off" when COMM_TCP_SHM=0 on that rank
//     seg/<i>/<j>   set by i: "<name> <nonce>" or "fail"
//     ok/<i>/<j>    set by j after mapping (and unlinking) it: "1", or "0" to fall
//                   back to TCP for this pair. Both sides use shm only after "1".
//   Every rank first creates its segments (j > i), then opens the lower ranks' ones,
//   then reads the verdicts, so no rank waits on one that waits on it. The object is
//   unlinked as soon as both sides mapped it (by j), and again by i on every error
//   path, so nothing is left in /dev/shm even when a rank dies during setup.
#include <memory>
#include <string>
#include <vector>

#include "backends/tcp/shm_ring.h"
#include "comm/error.h"
#include "comm/store/store.h"

namespace dpt::tcp {

// One mapped segment, seen from one rank: what it sends into and reads from.
class ShmChannel {
 public:
  ShmChannel(void* base, size_t bytes, bool lower);
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;
  ShmRing& out() { return out_; }
  ShmRing& in() { return in_; }

 private:
  void* base_;
  size_t bytes_;
  ShmRing out_, in_;
};
using ShmChannelPtr = std::unique_ptr<ShmChannel>;

struct ShmConfig {
  int rank = 0;
  int world = 1;
  bool enabled = true;          // COMM_TCP_SHM
  uint64_t ring_bytes = 0;      // per direction, a power of two
  uint64_t job_id = 0;
  uint64_t comm_id = 0;
  std::string prefix;           // the communicator's store namespace
  Millis timeout{120000};
  ErrorContext ctx;
};

// Collective over all ranks. Returns one entry per rank: a channel for each same-host
// peer that agreed, null for the others (and for this rank). Throws TimeoutError if a
// peer does not take part in time; falls back to TCP (logged) on any shm failure.
std::vector<ShmChannelPtr> setup_shm_channels(Store& store, const ShmConfig& cfg);


}  // namespace dpt::tcp
