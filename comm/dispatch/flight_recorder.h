#pragma once
// The flight recorder: the last N operations of every communicator of this process, kept
// always (a slot write under a lock per operation, next to a collective's microseconds),
// and written out when something goes wrong, so that a hang or a failure leaves a record
// of what each rank was doing (tools/flight_report.py reads every rank's).
//
// Terms:
//   entry     one collective (numbered by the communicator's queue: seq) or one
//             point-to-point call of the user's (isend/irecv; the algorithms' own
//             messages belong to their collective): kind, element count, dtype, reduce
//             op, root or peer, algorithm, the trainer's context when it was issued
//             (step, phase, bucket; -1 where none) and its state with the times
//             (ns since the recorder's epoch): scheduled -> started -> completed | failed.
//             A point-to-point call is posted, then completed (completion is seen for
//             the backends whose Work reports it, tcp's; otherwise it stays posted).
//   ring      DPT_FLIGHT_ENTRIES entries (default 2048) per communicator: the newest
//             overwrite the oldest.
//   dump      one JSON file per process, `DPT_FLIGHT_DIR` (default $TMPDIR/dpt_flight, or
//             /tmp/dpt_flight) / rank<world rank>.json: every live communicator's ring, the
//             reason, the time, and the trainer's context at the dump. Written on the
//             first timeout, failed collective or abort of any communicator of the process
//             (and then never replaced), on SIGUSR2 (dump and go on: a watcher thread does
//             the writing, outside the handler), on a request through the store
//             (comm/dispatch/flight_request.h) and on a call of dump_flight_records.
//             DPT_FLIGHT=0 turns recording off.
//   context   what the trainer is doing, set by it (set_flight_step / set_flight_phase /
//             set_flight_bucket), copied into each entry when it is issued.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/types.h"

namespace dpt {

struct CollArgs;

class FlightRecorder {
 public:
  enum class State : uint8_t { scheduled, started, completed, failed, posted };
  // The communicator's rank and size; it is numbered by its creation order in this process
  // (ranks create their communicators in the same order, so the numbers match across ranks).
  FlightRecorder(int rank, int size);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Collectives, by their queue number (seq).
  void scheduled(const CollArgs& a);
  void started(int64_t seq, const char* algorithm);
  void finished(int64_t seq, bool ok, const std::string& error = {});
  // Point-to-point: returns the entry's id for its completion.
  uint64_t posted(bool send, size_t count, DType dtype, int peer, int64_t tag);
  void p2p_finished(uint64_t id);

  // The ring as JSON (an object), oldest first.
  std::string json() const;
  bool enabled() const { return capacity_ > 0; }

 private:
  struct Entry {
    int64_t seq = -1;        // collectives; p2p: -1
    uint64_t id = 0;         // p2p: its number among this communicator's p2p calls
    uint8_t kind = 0;        // CollKind, or 100 send / 101 recv
    uint8_t dtype = 0, op = 0;
    State state = State::scheduled;
    int32_t root_or_peer = -1;
    uint64_t count = 0;
    int64_t tag = 0;
    const char* algorithm = "";  // a registered name (static storage)
    int64_t step = -1;
    int32_t bucket = -1;
    uint8_t phase = 0;
    int64_t t_scheduled = 0, t_started = 0, t_finished = 0;
    std::string error;
  };
  Entry* slot_of_seq(int64_t seq);  // under mu_; null when overwritten
  size_t p2p_capacity() const { return std::max<size_t>(capacity_ / 4, 16); }
  void fill_context(Entry& e) const;

  const int rank_, size_;
  const int number_;  // creation order in this process
  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<Entry> coll_, p2p_;
  uint64_t p2p_next_ = 0;
  int64_t coll_next_ = 0;  // the seqs held: [next - capacity, next), those not overwritten
};

// The trainer's context (process-wide; the step and phase of the thread that trains).
// Phases: "", "data", "forward", "backward", "sync", "update", "eval", "save", "outer",
// "reform" (elastic re-forming).
void set_flight_step(int64_t step);
void set_flight_phase(const char* phase);  // one of the above (others are recorded as "other")
void set_flight_bucket(int32_t bucket);    // -1 outside a bucket's launch
// The recorder's clock: nanoseconds since its epoch (steady), the entries' times.
int64_t flight_now_ns();

// Writes every live recorder's ring to the dump file; returns its path ("" when recording
// is off, no communicator is alive, or the file could not be written: the reason goes to
// stderr). `once` marks a failure's record (a timeout, a failed collective, an abort):
// only the first is written (a timeout on every communicator is one event), and no later
// dump of either kind replaces it. `why_not`, when given, gets the reason of a "" return.
std::string dump_flight_records(const std::string& reason, bool once = false, std::string* why_not = nullptr);
// The dump file's path for this process.
std::string flight_dump_path();

}  // namespace dpt
