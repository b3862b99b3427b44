#pragma once
// The contract every backend keeps. A Communicator is a group of `size()` ranks that
// exchange Buffers. Point-to-point calls are tagged and run concurrently; collectives
// are queued and executed in issue order on one worker thread per communicator (like a
// CUDA stream), so every rank must issue the same collectives in the same order, as in
// MPI and NCCL. Every call has an *_async form returning a Work; the plain form waits.
// A plain (blocking) call on host buffers that finds the worker idle and nothing queued
// runs on the calling thread instead, and a thread waiting on a queued collective runs
// the queue up to it itself (comm/dispatch/collective_queue.h): same order, same errors, and no
// thread wake-up per collective, which is most of a small collective's latency.
//
// Conventions (NCCL's): in-place is send.data == recv.data; for allgather in-place means
// send is recv's own slot (recv + rank*count), for reduce_scatter recv is send's own slot.
// Counts: reduce_scatter send = size*recv.count elements; allgather recv = size*send.count;
// gather/scatter/alltoall move send.count (resp. recv.count) elements per rank.
//
// Backends implement only: raw tagged isend/irecv (do_isend/do_irecv), and optionally
// native collectives (native_supports/run_native) and split (do_split).
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/algorithms/algo.h"
#include "comm/error.h"
#include "comm/launch/topology.h"
#include "comm/traffic.h"
#include "comm/types.h"
#include "comm/work.h"

namespace dpt {

namespace device { class DeviceStaging; }
namespace algo { struct Threshold; }
class CollectiveQueue;
class FlightRecorder;
struct QueueStats;

enum class CollKind : uint8_t {
  allreduce, reduce, broadcast, reduce_scatter, allgather, gather, scatter, alltoall, barrier
};
const char* coll_name(CollKind k);

// Everything one collective call needs; also what ranks would compare to detect a
// mismatched collective.
struct CollArgs {
  CollKind kind = CollKind::barrier;
  Buffer send;
  Buffer recv;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  Algo algo = Algo::automatic;  // as requested; the selector resolves automatic
  int64_t seq = -1;
  int64_t tag = 0;              // internal tag this collective's messages use
};

// The algorithms' size knobs. Each `auto` threshold belongs to the algorithm that
// declares it (comm/algorithms/registry.h, Algorithm::threshold) and is named by its
// environment variable, e.g. set("COMM_TREE_MAX_BYTES", 1 << 20); one never set takes
// the default its algorithm declares. CommOptions::from_env sets every registered one.
class AlgoThresholds {
 public:
  size_t segment_bytes = 1 << 20;  // ring and tree-broadcast pipelining segment (COMM_SEGMENT_BYTES)
  // Hierarchical allreduce's pipeline piece (COMM_HIERARCHICAL_PIECE_BYTES; 0 = no pipeline).
  size_t hierarchical_piece_bytes = 1 << 20;

  // Both throw std::invalid_argument, listing the registered variables, for a variable
  // no registered algorithm declares.
  void set(std::string_view env, size_t bytes);
  size_t get(std::string_view env) const;
  // The selector's lookup: the value set for `t.env`, else t.default_bytes.
  size_t get(const algo::Threshold& t) const;

 private:
  std::vector<std::pair<const char*, size_t>> values_;  // (a registered Threshold's env, bytes)
};

struct CommOptions {
  Algo algo = Algo::automatic;
  Millis timeout{std::chrono::seconds(300)};
  AlgoThresholds thresholds;
  // Compare a fingerprint of every collective across ranks before running it
  // (comm/dispatch/collective_fingerprint.h): a mismatch becomes MismatchError, not a hang.
  bool debug_collectives = false;
  // A thread waiting on a queued collective runs it (and those before it) itself
  // instead of the worker thread (comm/dispatch/collective_queue.h, "driver").
  bool waiters_run = true;
  // Defaults from COMM_ALGO, COMM_TIMEOUT_S, every registered algorithm's threshold
  // variable (COMM_RD_MAX_BYTES, COMM_TREE_MAX_BYTES, ...), COMM_SEGMENT_BYTES,
  // COMM_HIERARCHICAL_PIECE_BYTES,
  // COMM_DEBUG_COLLECTIVES, COMM_WAITERS_RUN.
  static CommOptions from_env();
};

class Communicator {
 public:
  // User tags live in [0, kMaxUserTag]; tags above are the collectives' own.
  static constexpr int64_t kMaxUserTag = (int64_t{1} << 30) - 1;
  static constexpr int kUndefinedColor = -1;

  Communicator(int rank, int size, CommOptions options);
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  // Who ran this communicator's collectives so far (comm/dispatch/collective_queue.h).
  QueueStats queue_stats() const;
  int size() const { return size_; }
  virtual std::string backend_name() const = 0;
  const CommOptions& options() const { return options_; }
  Millis timeout() const { return options_.timeout; }
  // How long a caller waits on a Work by default: the timeout plus kWaitGrace. The
  // backend's own waits end at the timeout and name the peer and the op's sequence
  // number; the grace lets that precise error, not a bare "timed out", reach the caller.
  static constexpr Millis kWaitGrace{1000};
  Millis wait_timeout() const { return options_.timeout + kWaitGrace; }
  void set_algo(Algo a) { options_.algo = a; }
  void set_timeout(Millis t) { options_.timeout = t; }
  // Error context for messages: rank, world, backend, op, peer, seq.
  ErrorContext context(const std::string& op, int peer = -1, int64_t seq = -1) const;

  // ---- point-to-point ----
  WorkPtr isend(const Buffer& buf, int peer, int64_t tag);
  WorkPtr irecv(const Buffer& buf, int peer, int64_t tag);
  void send(const Buffer& buf, int peer, int64_t tag) { isend(buf, peer, tag)->wait(); }
  void recv(const Buffer& buf, int peer, int64_t tag) { irecv(buf, peer, tag)->wait(); }

  // ---- collectives ----
  WorkPtr allreduce_async(const Buffer& send, const Buffer& recv, ReduceOp op);
  WorkPtr reduce_async(const Buffer& send, const Buffer& recv, ReduceOp op, int root);
  WorkPtr broadcast_async(const Buffer& buf, int root);
  WorkPtr reduce_scatter_async(const Buffer& send, const Buffer& recv, ReduceOp op);
  WorkPtr allgather_async(const Buffer& send, const Buffer& recv);
  WorkPtr gather_async(const Buffer& send, const Buffer& recv, int root);
  WorkPtr scatter_async(const Buffer& send, const Buffer& recv, int root);
  WorkPtr alltoall_async(const Buffer& send, const Buffer& recv);
  WorkPtr barrier_async();

  void allreduce(const Buffer& send, const Buffer& recv, ReduceOp op) { run_blocking({CollKind::allreduce, send, recv, op}); }
  void allreduce(const Buffer& buf, ReduceOp op) { allreduce(buf, buf, op); }
  void reduce(const Buffer& send, const Buffer& recv, ReduceOp op, int root) { run_blocking({CollKind::reduce, send, recv, op, root}); }
  void broadcast(const Buffer& buf, int root) { run_blocking({CollKind::broadcast, buf, buf, ReduceOp::sum, root}); }
  void reduce_scatter(const Buffer& send, const Buffer& recv, ReduceOp op) { run_blocking({CollKind::reduce_scatter, send, recv, op}); }
  void allgather(const Buffer& send, const Buffer& recv) { run_blocking({CollKind::allgather, send, recv}); }
  void gather(const Buffer& send, const Buffer& recv, int root) { run_blocking({CollKind::gather, send, recv, ReduceOp::sum, root}); }
  void scatter(const Buffer& send, const Buffer& recv, int root) { run_blocking({CollKind::scatter, send, recv, ReduceOp::sum, root}); }
  void alltoall(const Buffer& send, const Buffer& recv) { run_blocking({CollKind::alltoall, send, recv}); }
  void barrier() {
    CollArgs a;
    a.kind = CollKind::barrier;
    run_blocking(a);
  }

  // Byte-string helpers for the all_gather_object use case (sizes may differ per rank).
  std::vector<std::string> allgather_bytes(const std::string& mine);
  std::string broadcast_bytes(const std::string& value, int root);

  // New communicator of the ranks that passed the same color, ordered by (key, rank).
  // Collective over this communicator; returns nullptr for kUndefinedColor.
  std::unique_ptr<Communicator> split(int color, int key);

  // Ends the communicator: queued and in-flight operations fail with AbortedError.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(); }

  // Which ranks share a host (comm/launch/topology.h). The backend sets it when it builds the
  // communicator (from every rank's host_id_digest, after COMM_FAKE_HOSTS); a split
  // inherits its parent's; one host when the backend does not know.
  const Topology& topology() const { return topology_; }
  void set_host_digests(const std::vector<uint64_t>& digests);
  // For the hierarchical algorithms, on the thread running a collective: the ranks of
  // this rank's host, the ranks with this rank's local rank on every host, and every
  // rank in host order. Built on first use from the topology alone (every rank derives
  // the same members, so no message is needed), then kept; they run on this
  // communicator's point-to-point calls in tag spaces of their own.
  Communicator& host_group() { return topology_group(0); }
  Communicator& cross_host_group() { return topology_group(1); }
  Communicator& host_ordered_group() { return topology_group(2); }

  // Operations and payload bytes this communicator carried so far (comm/traffic.h).
  Traffic traffic() const;
  // Takes the communicator out of service without touching its peers (a trainer that
  // switched to another backend): any later operation raises a UsageError naming this
  // backend and `why`. What it carried stays readable.
  void retire(const std::string& why);
  bool retired() const { return retired_.load(); }

  // Which algorithm a collective with these arguments would run (for logs and benches).
  Algo resolve_algo(const CollArgs& a) const;
  // Whether a collective of this kind on CUDA buffers reaches the backend as device
  // buffers (NCCL; a CUDA-aware MPI's native collectives) instead of being staged
  // through pinned host memory. A trainer reduces gradients where that is cheaper.
  bool takes_device_collective(CollKind kind, DType dtype, size_t count, ReduceOp op) const;

  // ---- for algorithms: raw point-to-point in the collectives' tag space ----
  WorkPtr isend_internal(const Buffer& buf, int peer, int64_t tag) {
    count_other_host(peer, buf.bytes(), 0);
    return do_isend(buf, peer, tag);
  }
  WorkPtr irecv_internal(const Buffer& buf, int peer, int64_t tag) {
    count_other_host(peer, 0, buf.bytes());
    return do_irecv(buf, peer, tag);
  }
  // Bracket one of our algorithms on the thread running it, so that a backend whose
  // waiters can move the bytes themselves (tcp) keeps its own thread out of the way.
  virtual void algorithm_begins() {}
  virtual void algorithm_ends() {}

 protected:
  void set_topology(Topology t) { topology_ = std::move(t); }
  // Raw tagged point-to-point: must be callable from several threads at once, must not
  // block, and must fail (not hang) when the peer is gone. Messages between one pair
  // with one tag are matched in order.
  virtual WorkPtr do_isend(const Buffer& buf, int peer, int64_t tag) = 0;
  virtual WorkPtr do_irecv(const Buffer& buf, int peer, int64_t tag) = 0;
  // Native collectives, run on the worker thread; run_native blocks until done.
  virtual bool native_supports(const CollArgs& a) const { return false; }
  virtual void run_native(const CollArgs& a) { throw std::logic_error("no native collective"); }
  // True when `auto` should take the native collective for `a` (the tcp backend's
  // shared-memory arena); Open MPI's are taken only when asked for.
  virtual bool native_preferred(const CollArgs& a) const { return false; }
  // Backend-specific split; the default builds a SubgroupCommunicator over this one.
  virtual std::unique_ptr<Communicator> do_split(int color, int key);
  virtual void do_abort(const std::string& reason) {}
  // Device buffers: a backend that can take them itself (NCCL; a CUDA-aware MPI for its
  // native collectives and point-to-point) says so here; otherwise the base class stages
  // them through pinned host memory (comm/device/staging.h) and the backend and the
  // algorithms only ever see host buffers.
  virtual bool takes_device_buffers(const CollArgs& a, Algo resolved) const { return false; }
  virtual bool takes_device_p2p() const { return false; }
  // False for a backend whose collectives must all be native (NCCL: the algorithms
  // reduce on the host, which device memory does not allow without staging).
  virtual bool runs_algorithms() const { return true; }
  // False when collectives must stay on the worker thread (NCCL: its stream and the
  // CUDA current device belong to that thread).
  virtual bool runs_on_caller() const { return true; }
  // Subclasses must call this first in their destructor (joins the worker before the
  // backend's members go away).
  void shutdown_worker();

 private:
  WorkPtr enqueue(CollArgs args);
  void run_blocking(CollArgs args);
  // Runs one collective (on the worker or a caller's thread: collective_queue.h);
  // returns its error, relabeled with the collective, or null.
  std::exception_ptr run_task(const CollArgs& a);
  bool runs_inline(const CollArgs& a) const;
  void execute(const CollArgs& a);
  void execute_on_host(const CollArgs& a, Algo algo);
  void check_args(const CollArgs& a) const;
  void check_device(const Buffer& b, const char* op) const;
  void check_in_service(const char* op, int peer = -1) const;
  // The flight recorder's entry of a user point-to-point call, completed with its Work.
  void record_p2p(const WorkPtr& w, bool send, const Buffer& buf, int peer, int64_t tag);
  void count(uint64_t sent, uint64_t received);
  // A message to or from `peer`, when it is on another host (Traffic::other_hosts_*).
  void count_other_host(int peer, uint64_t sent, uint64_t received) {
    if (topology_.hosts() > 1 && topology_.host_of(peer) != topology_.my_host()) {
      other_hosts_sent_.fetch_add(sent, std::memory_order_relaxed);
      other_hosts_received_.fetch_add(received, std::memory_order_relaxed);
    }
  }
  Communicator& topology_group(int which);

  int rank_;
  int size_;
  CommOptions options_;
  int split_count_ = 0;
  std::mutex abort_mu_;            // guards abort_reason_'s writing
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
  std::atomic<bool> retired_{false};
  std::string retire_reason_;      // written once, before retired_ is set
  std::atomic<uint64_t> ops_{0}, bytes_sent_{0}, bytes_received_{0};
  std::atomic<uint64_t> other_hosts_sent_{0}, other_hosts_received_{0};
  std::exception_ptr broken_;      // first error: later collectives fail fast with it
  // The last operations (comm/dispatch/flight_recorder.h); shared with the completion
  // callbacks of point-to-point Works, which may outlive the communicator.
  std::shared_ptr<FlightRecorder> flight_;
  std::unique_ptr<device::DeviceStaging> staging_;  // used by whoever runs a collective; made on first use
  Topology topology_;
  std::unique_ptr<Communicator> topology_groups_[3];  // host_group, cross_host_group, host_ordered_group
  std::unique_ptr<CollectiveQueue> queue_;          // the order of collectives and who runs them
};

}  // namespace dpt
