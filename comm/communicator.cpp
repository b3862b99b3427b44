#include "comm/communicator.h"
#include "comm/dispatch/flight_recorder.h"

#include <algorithm>
#include <cstring>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/selector.h"
#include "comm/dispatch/collective_queue.h"
#include "comm/dispatch/collective_fingerprint.h"
#include "comm/device/device_reduce.h"
#include "comm/device/staging.h"
#include "comm/launch/env.h"
#include "comm/reduce_kernels.h"
#include "comm/dispatch/subgroup_communicator.h"

namespace dpt {

const char* coll_name(CollKind k) {
  switch (k) {
    case CollKind::allreduce: return "allreduce";
    case CollKind::reduce: return "reduce";
    case CollKind::broadcast: return "broadcast";
    case CollKind::reduce_scatter: return "reduce_scatter";
    case CollKind::allgather: return "allgather";
    case CollKind::gather: return "gather";
    case CollKind::scatter: return "scatter";
    case CollKind::alltoall: return "alltoall";
    case CollKind::barrier: return "barrier";
  }
  return "invalid";
}

CommOptions CommOptions::from_env() {
  CommOptions o;
  o.algo = parse_algo(env::get_string(env::kAlgo));
  double t = env::get_double(env::kTimeoutS);
  if (t <= 0) throw std::invalid_argument("COMM_TIMEOUT_S must be positive");
  o.timeout = Millis(static_cast<int64_t>(t * 1000));
  for (const algo::Algorithm* a : algo::all()) {  // each algorithm's own `auto` threshold
    const char* var = a->threshold.env;
    if (!var) continue;
    const int64_t bytes = env::get_int(var, int64_t(a->threshold.default_bytes));
    if (bytes < 0) throw std::invalid_argument(std::string(var) + " must be >= 0");
    o.thresholds.set(var, static_cast<size_t>(bytes));
  }
  int64_t seg = env::get_int(env::kSegmentBytes);
  if (seg < 64) throw std::invalid_argument("COMM_SEGMENT_BYTES must be at least 64");
  o.thresholds.segment_bytes = static_cast<size_t>(seg);
  const int64_t piece = env::get_int(env::kHierarchicalPieceBytes);
  if (piece < 0) throw std::invalid_argument("COMM_HIERARCHICAL_PIECE_BYTES must be >= 0");
  o.thresholds.hierarchical_piece_bytes = static_cast<size_t>(piece);
  o.debug_collectives = env::get_bool(env::kDebugCollectives);
  o.waiters_run = env::get_bool(env::kWaitersRun);
  return o;
}

Communicator::Communicator(int rank, int size, CommOptions options)
    : rank_(rank), size_(size), options_(options) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("communicator: rank " + std::to_string(rank) + " of size " +
                                std::to_string(size) + " is invalid");
  queue_ = std::make_unique<CollectiveQueue>([this](const CollArgs& a) { return run_task(a); },
                                             [this](const CollArgs& a) { return runs_inline(a); }, options_.waiters_run);
  flight_ = std::make_shared<FlightRecorder>(rank, size);
  if (flight_->enabled()) queue_->on_numbered([f = flight_.get()](const CollArgs& a) { f->scheduled(a); });
}

Communicator::~Communicator() { shutdown_worker(); }

void Communicator::shutdown_worker() {
  for (auto& g : topology_groups_) g.reset();
  queue_->stop();
}

void Communicator::set_host_digests(const std::vector<uint64_t>& digests) {
  if (int(digests.size()) != size_)
    throw std::logic_error("set_host_digests: " + std::to_string(digests.size()) + " digests for " + std::to_string(size_) +
                           " ranks");
  topology_ = Topology(apply_fake_hosts(digests), rank_);
}

Communicator& Communicator::topology_group(int which) {
  auto& group = topology_groups_[which];
  if (group) return *group;
  const Topology& t = topology_;
  std::vector<int> members;
  if (which == 0) {
    members = t.ranks_of_host(t.my_host());
  } else if (which == 1) {
    for (int h = 0; h < t.hosts(); ++h)
      if (t.local_rank() < int(t.ranks_of_host(h).size())) members.push_back(t.ranks_of_host(h)[size_t(t.local_rank())]);
  } else {
    members = t.host_order();
  }
  const int me = int(std::find(members.begin(), members.end(), rank_) - members.begin());
  group = make_topology_group(*this, std::move(members), me, which);
  return *group;
}

QueueStats Communicator::queue_stats() const { return queue_->stats(); }

ErrorContext Communicator::context(const std::string& op, int peer, int64_t seq) const {
  return ErrorContext{rank_, size_, backend_name(), op, peer, seq};
}

// ---- point-to-point ----

WorkPtr Communicator::isend(const Buffer& buf, int peer, int64_t tag) {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw UsageError(context("send", peer), "peer must be another rank in [0, " + std::to_string(size_) + ")");
  if (tag < 0 || tag > kMaxUserTag)
    throw UsageError(context("send", peer), "tag " + std::to_string(tag) + " outside [0, " + std::to_string(kMaxUserTag) + "]");
  if (aborted_) throw AbortedError(context("send", peer), "communicator was aborted: " + abort_reason_);
  check_in_service("send", peer);
  check_device(buf, "send");
  WorkPtr w = !buf.device.is_cpu() && buf.count > 0 && !takes_device_p2p()
                  ? device::staged_isend(buf, [&](const Buffer& host) { return do_isend(host, peer, tag); })
                  : do_isend(buf, peer, tag);
  w->set_default_timeout(wait_timeout());
  record_p2p(w, true, buf, peer, tag);
  count(buf.bytes(), 0);
  count_other_host(peer, buf.bytes(), 0);
  return w;
}

WorkPtr Communicator::irecv(const Buffer& buf, int peer, int64_t tag) {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw UsageError(context("recv", peer), "peer must be another rank in [0, " + std::to_string(size_) + ")");
  if (tag < 0 || tag > kMaxUserTag)
    throw UsageError(context("recv", peer), "tag " + std::to_string(tag) + " outside [0, " + std::to_string(kMaxUserTag) + "]");
  if (aborted_) throw AbortedError(context("recv", peer), "communicator was aborted: " + abort_reason_);
  check_in_service("recv", peer);
  check_device(buf, "recv");
  WorkPtr w = !buf.device.is_cpu() && buf.count > 0 && !takes_device_p2p()
                  ? device::staged_irecv(buf, [&](const Buffer& host) { return do_irecv(host, peer, tag); })
                  : do_irecv(buf, peer, tag);
  w->set_default_timeout(wait_timeout());
  record_p2p(w, false, buf, peer, tag);
  count(0, buf.bytes());
  count_other_host(peer, 0, buf.bytes());
  return w;
}

void Communicator::record_p2p(const WorkPtr& w, bool send, const Buffer& buf, int peer, int64_t tag) {
  if (!flight_->enabled()) return;
  const uint64_t id = flight_->posted(send, buf.count, buf.dtype, peer, tag);
  // Completion is seen where the Work reports it (tcp's PromiseWork); else it stays posted.
  if (auto pw = std::dynamic_pointer_cast<PromiseWork>(w)) pw->on_finish([f = flight_, id] { f->p2p_finished(id); });
}

void Communicator::check_in_service(const char* op, int peer) const {
  if (retired_) throw UsageError(context(op, peer), "this " + backend_name() + " communicator was retired (" + retire_reason_ + ")");
}

void Communicator::count(uint64_t sent, uint64_t received) {
  ops_.fetch_add(1, std::memory_order_relaxed);
  bytes_sent_.fetch_add(sent, std::memory_order_relaxed);
  bytes_received_.fetch_add(received, std::memory_order_relaxed);
}

Traffic Communicator::traffic() const {
  return Traffic{ops_.load(std::memory_order_relaxed), bytes_sent_.load(std::memory_order_relaxed),
                 bytes_received_.load(std::memory_order_relaxed), other_hosts_sent_.load(std::memory_order_relaxed),
                 other_hosts_received_.load(std::memory_order_relaxed)};
}

void Communicator::retire(const std::string& why) {
  std::lock_guard<std::mutex> lk(abort_mu_);
  if (retired_) return;
  retire_reason_ = why;
  retired_ = true;
}

// ---- collectives: argument checks on the caller's thread, execution on the worker ----

void Communicator::check_device(const Buffer& b, const char* op) const {
  if (b.device.is_cpu() || b.count == 0) return;
  try {
    device::check_usable(b.device, "buffer");
  } catch (const device::DeviceError& e) {
    throw UsageError(context(op), e.what());
  }
}

void Communicator::check_args(const CollArgs& a) const {
  auto fail = [&](const std::string& why) { throw UsageError(context(coll_name(a.kind)), why); };
  check_in_service(coll_name(a.kind));
  check_device(a.send, coll_name(a.kind));
  check_device(a.recv, coll_name(a.kind));
  const bool needs_root = a.kind == CollKind::reduce || a.kind == CollKind::broadcast ||
                          a.kind == CollKind::gather || a.kind == CollKind::scatter;
  if (needs_root && (a.root < 0 || a.root >= size_))
    fail("root " + std::to_string(a.root) + " outside [0, " + std::to_string(size_) + ")");
  if (a.kind == CollKind::barrier || a.kind == CollKind::broadcast) return;
  if (a.send.dtype != a.recv.dtype)
    fail(std::string("send dtype ") + dtype_name(a.send.dtype) + " differs from recv dtype " + dtype_name(a.recv.dtype));
  const size_t n = static_cast<size_t>(size_);
  auto need = [&](size_t got, size_t want, const char* which) {
    if (got != want)
      fail(std::string(which) + " has " + std::to_string(got) + " elements, expected " + std::to_string(want));
  };
  const bool is_root = rank_ == a.root;
  switch (a.kind) {
    case CollKind::allreduce: need(a.recv.count, a.send.count, "recv"); break;
    case CollKind::reduce: if (is_root) need(a.recv.count, a.send.count, "recv"); break;
    case CollKind::reduce_scatter: need(a.send.count, a.recv.count * n, "send"); break;
    case CollKind::allgather: need(a.recv.count, a.send.count * n, "recv"); break;
    case CollKind::gather: if (is_root) need(a.recv.count, a.send.count * n, "recv"); break;
    case CollKind::scatter: if (is_root) need(a.send.count, a.recv.count * n, "send"); break;
    case CollKind::alltoall:
      need(a.send.count, a.recv.count, "send");
      if (a.recv.count % n != 0) fail("alltoall count " + std::to_string(a.recv.count) + " is not a multiple of the world size");
      if (a.send.data == a.recv.data && a.recv.count > 0) fail("alltoall cannot run in place");
      break;
    default: break;
  }
}

WorkPtr Communicator::enqueue(CollArgs args) {
  check_args(args);
  if (args.algo == Algo::automatic) args.algo = options_.algo;
  return queue_->push(args, context(coll_name(args.kind)), wait_timeout());
}

WorkPtr Communicator::allreduce_async(const Buffer& s, const Buffer& r, ReduceOp op) {
  return enqueue(CollArgs{CollKind::allreduce, s, r, op});
}
WorkPtr Communicator::reduce_async(const Buffer& s, const Buffer& r, ReduceOp op, int root) {
  return enqueue(CollArgs{CollKind::reduce, s, r, op, root});
}
WorkPtr Communicator::broadcast_async(const Buffer& b, int root) {
  return enqueue(CollArgs{CollKind::broadcast, b, b, ReduceOp::sum, root});
}
WorkPtr Communicator::reduce_scatter_async(const Buffer& s, const Buffer& r, ReduceOp op) {
  return enqueue(CollArgs{CollKind::reduce_scatter, s, r, op});
}
WorkPtr Communicator::allgather_async(const Buffer& s, const Buffer& r) {
  return enqueue(CollArgs{CollKind::allgather, s, r});
}
WorkPtr Communicator::gather_async(const Buffer& s, const Buffer& r, int root) {
  return enqueue(CollArgs{CollKind::gather, s, r, ReduceOp::sum, root});
}
WorkPtr Communicator::scatter_async(const Buffer& s, const Buffer& r, int root) {
  return enqueue(CollArgs{CollKind::scatter, s, r, ReduceOp::sum, root});
}
WorkPtr Communicator::alltoall_async(const Buffer& s, const Buffer& r) {
  return enqueue(CollArgs{CollKind::alltoall, s, r});
}
WorkPtr Communicator::barrier_async() {
  CollArgs a;
  a.kind = CollKind::barrier;
  return enqueue(a);
}

Algo Communicator::resolve_algo(const CollArgs& a) const {
  Algo requested = a.algo == Algo::automatic ? options_.algo : a.algo;
  const bool native_ok = native_supports(a);
  return algo::select(a, requested, size_, native_ok, native_ok && native_preferred(a), options_.thresholds,
                      topology_);
}

bool Communicator::takes_device_collective(CollKind kind, DType dtype, size_t count, ReduceOp op) const {
  CollArgs a;
  a.kind = kind;
  a.send = a.recv = Buffer{nullptr, count, dtype, Device{DeviceKind::cuda, 0}};
  a.op = op;
  return takes_device_buffers(a, resolve_algo(a));
}

void Communicator::run_blocking(CollArgs args) {
  check_args(args);
  if (args.algo == Algo::automatic) args.algo = options_.algo;
  std::exception_ptr err;
  if (!queue_->try_run_here(args, err)) {
    // Busy, or collectives queued before this one: wait for it in its turn (and run
    // the queue up to it on this thread: collective_queue.h, "driver").
    enqueue(args)->wait(wait_timeout());
    return;
  }
  if (err) std::rethrow_exception(err);
}

// Host buffers, and a backend whose collectives may run on any thread.
bool Communicator::runs_inline(const CollArgs& a) const {
  return a.send.device.is_cpu() && a.recv.device.is_cpu() && runs_on_caller();
}

std::exception_ptr Communicator::run_task(const CollArgs& a) {
  try {
    if (aborted_) throw AbortedError(context(coll_name(a.kind), -1, a.seq), "communicator was aborted: " + abort_reason_);
    if (broken_) std::rethrow_exception(broken_);
    if (options_.debug_collectives) check_collective_fingerprints(*this, a);
    execute(a);  // the flight recorder's "started" is in there, with the algorithm it chose
    const auto payload = collective_payload(a, rank_);
    count(payload.first, payload.second);
    flight_->finished(a.seq, true);
    return nullptr;
  } catch (const CommError& e) {
    flight_->finished(a.seq, false, e.what());
    // A timeout is what a hang turns into, and a peer's failure what the others see of
    // it: every rank that sees either writes its record (once per process), so the ranks'
    // records can be read side by side. A usage error is this rank's own, and fails alike
    // everywhere.
    if (!dynamic_cast<const UsageError*>(&e))
      dump_flight_records(std::string(dynamic_cast<const TimeoutError*>(&e) ? "timeout" : "failure") + " in " +
                              coll_name(a.kind) + " (collective " + std::to_string(a.seq) + ")",
                          true);
    // Re-label the error with the collective it happened in, keeping its kind and peer.
    ErrorContext ctx = context(std::string(coll_name(a.kind)) + "/" + algo_name(resolve_algo(a)),
                               e.context().peer, a.seq);
    std::exception_ptr ep;
    if (dynamic_cast<const TimeoutError*>(&e)) ep = std::make_exception_ptr(TimeoutError(ctx, e.detail()));
    else if (dynamic_cast<const PeerError*>(&e)) ep = std::make_exception_ptr(PeerError(ctx, e.detail()));
    else if (dynamic_cast<const MismatchError*>(&e)) ep = std::make_exception_ptr(MismatchError(ctx, e.detail()));
    else if (dynamic_cast<const AbortedError*>(&e)) ep = std::make_exception_ptr(AbortedError(ctx, e.detail()));
    else if (dynamic_cast<const UsageError*>(&e)) ep = std::make_exception_ptr(UsageError(ctx, e.detail()));
    else ep = std::make_exception_ptr(CommError(ctx, e.detail()));
    // A usage error fails identically on every rank and leaves them in step; anything
    // else may have left ranks out of step, so the communicator is unusable after it.
    if (!broken_ && !dynamic_cast<const UsageError*>(&e)) broken_ = ep;
    return ep;
  } catch (const std::exception& e) {
    flight_->finished(a.seq, false, e.what());
    auto ep = std::make_exception_ptr(CommError(context(coll_name(a.kind), -1, a.seq), e.what()));
    if (!broken_) broken_ = ep;
    return ep;
  }
}

void Communicator::execute(const CollArgs& a) {
  const Algo algo = resolve_algo(a);
  flight_->started(a.seq, algo_name(algo));
  if (algo != Algo::native && !runs_algorithms())
    throw UsageError(context(coll_name(a.kind), -1, a.seq),
                     "backend '" + backend_name() + "' runs only its own collectives; use --algo auto or native");
  if (device::has_device_buffer(a, rank_) && !takes_device_buffers(a, algo)) {
    if (!staging_) staging_ = std::make_unique<device::DeviceStaging>();
    staging_->run(a, rank_, [&](const CollArgs& host) { execute_on_host(host, algo); });
    return;
  }
  execute_on_host(a, algo);
}

// Runs `a` with `algo`; device buffers reach here only if the backend takes them.
void Communicator::execute_on_host(const CollArgs& a, Algo algo) {
  if (algo == Algo::native) {
    if (!native_supports(a))
      throw UsageError(context(coll_name(a.kind), -1, a.seq),
                       "backend '" + backend_name() + "' has no native " + coll_name(a.kind) + " for " + dtype_name(a.recv.dtype) +
                           "/" + reduce_op_name(a.op) + "; use --algo auto|ring|tree");
    run_native(a);
    if (topology_.hosts() > 1) {  // no messages of ours to count: its whole payload (Traffic::other_hosts_*)
      const auto payload = collective_payload(a, rank_);
      other_hosts_sent_.fetch_add(payload.first, std::memory_order_relaxed);
      other_hosts_received_.fetch_add(payload.second, std::memory_order_relaxed);
    }
  } else {
    CollArgs b = a;
    if (b.op == ReduceOp::avg) b.op = ReduceOp::sum;  // divide once at the end
    struct Bracket {
      Communicator& c;
      explicit Bracket(Communicator& comm) : c(comm) { c.algorithm_begins(); }
      ~Bracket() { c.algorithm_ends(); }
    } bracket(*this);
    const algo::Algorithm* body = algo::find(a.kind, algo.name());
    if (!body) throw std::logic_error(std::string("no ") + algo_name(algo) + " algorithm for " + coll_name(a.kind));
    body->run(*this, b);
    if (a.op == ReduceOp::avg) {
      const bool has_result = a.kind == CollKind::allreduce || a.kind == CollKind::reduce_scatter ||
                              (a.kind == CollKind::reduce && rank_ == a.root);
      if (has_result) device::divide_in_place(a.recv.device, a.recv.data, a.recv.count, a.recv.dtype, size_);
    }
  }
}

// ---- helpers ----

std::vector<std::string> Communicator::allgather_bytes(const std::string& mine) {
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lens(size_);
  allgather(make_buffer(&len, 1), make_buffer(lens.data(), lens.size()));
  int64_t max_len = 0;
  for (int64_t l : lens) max_len = std::max(max_len, l);
  std::vector<uint8_t> padded(max_len), all(size_t(max_len) * size_);
  std::memcpy(padded.data(), mine.data(), mine.size());
  allgather(make_buffer(padded.data(), padded.size()), make_buffer(all.data(), all.size()));
  std::vector<std::string> out(size_);
  for (int i = 0; i < size_; ++i)
    out[i].assign(reinterpret_cast<const char*>(all.data()) + i * max_len, lens[i]);
  return out;
}

std::string Communicator::broadcast_bytes(const std::string& value, int root) {
  int64_t len = static_cast<int64_t>(value.size());
  broadcast(make_buffer(&len, 1), root);
  std::string out = rank_ == root ? value : std::string(size_t(len), '\0');
  broadcast(make_buffer(reinterpret_cast<uint8_t*>(out.data()), out.size()), root);
  return out;
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  check_in_service("split");
  if (color < kUndefinedColor)
    throw UsageError(context("split"), "color must be >= 0 or kUndefinedColor (-1)");
  return do_split(color, key);
}

std::unique_ptr<Communicator> Communicator::do_split(int color, int key) {
  int new_rank = -1;
  std::vector<int> members = split_members(*this, color, key, &new_rank);
  // Every rank counts the split, also one that passed kUndefinedColor: the next split's
  // context must be the same number on all of them (issue 25: a rank that skipped the
  // count gave its next subgroup another context, and its messages never matched).
  const uint64_t serial = uint64_t(++split_count_);
  if (members.empty()) return nullptr;
  uint64_t h = serial * 7919u + uint64_t(color) * 104729u;
  uint64_t ctx = 1 + (h % ((uint64_t{1} << 22) - 2));
  return std::make_unique<SubgroupCommunicator>(*this, std::move(members), new_rank, ctx);
}

void Communicator::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lk(abort_mu_);
    if (aborted_) return;
    abort_reason_ = reason;
    aborted_ = true;
  }
  dump_flight_records("abort: " + reason, true);
  do_abort(reason);
  // Fail what is still queued.
  queue_->fail_queued([&](const CollArgs& a) {
    return std::make_exception_ptr(
        AbortedError(context(coll_name(a.kind), -1, a.seq), "communicator was aborted: " + reason));
  });
}

}  // namespace dpt
