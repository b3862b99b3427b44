#pragma once
// The progress engine's inside (the public terms are in progress_engine.h), shared by the
// files that implement it, one job each:
//   progress_engine.cpp   the public face, and posting (any thread)
//   engine_loop.cpp       the engine thread's loop, and drivers (waiting threads that
//                         run the loop's turns themselves)
//   engine_peer_io.cpp    one connection: routing posted ops, writing and reading frames,
//                         early (unexpected) frames and the buffer budget
//   engine_failure.cpp    a peer's end, the communicator's failure, goodbyes, shutdown,
//                         op deadlines
//   engine_shm.cpp        shared-memory peers: doorbells, spinning and sleeping, a ring
//                         peer's end
//
// Terms (besides progress_engine.h's):
//   turn         - one pass of the loop: take the inbox, write the send queues, poll,
//                  read what arrived, expire ops past their deadline (engine_loop.cpp).
//   owner        - whoever runs turns holds DriveGate::owner: the engine thread, or one
//                  driver. Everything below "engine thread only" belongs to the owner.
//   inbox        - ops posted by any thread, under `mu`, taken by the owner each turn.
//   staging      - a per-peer 64 KiB buffer: one recv() picks up many small frames.
//   records      - a socket peer's stream is sealed into records (Peer::rec): a send op is
//                  done once its bytes are sealed (the ciphertext then waits in the
//                  writer); a record that fails its check ends the communicator, naming
//                  the peer and the connection.
//   paused       - a peer whose next frame would overflow the unexpected budget: it is
//                  not read until a receive for that frame is posted or the budget frees.
//   closing      - after the communicator failed: a peer whose connection stays open
//                  only until the abort frame queued for it is out (or kAbortFlush).
//   control frame- goodbye and abort frames the engine sends itself (Op::work is null).
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "backends/tcp/frame.h"
#include "backends/tcp/progress_engine.h"
#include "comm/net/record_stream.h"

namespace dpt::tcp {
namespace engine {

using net::Clock;

constexpr size_t kStageBytes = 64 * 1024;      // per-peer staging buffer
constexpr size_t kDirectMinBytes = 16 * 1024;  // payload rest at least this: read directly
constexpr size_t kReadBudget = 8u << 20;       // bytes read from one peer per loop turn
constexpr size_t kWriteBudget = 8u << 20;      // bytes written to one peer per loop turn
constexpr int kMaxIov = 64;
constexpr size_t kSealBatch = 256 * 1024;      // plaintext sealed into records per pass
constexpr Millis kExpiryCheck{100};
constexpr Millis kAbortFlush{1000};            // time to get abort frames out before closing

// A posted send or receive, or a control frame.
struct Op {
  bool is_send = false;
  int peer = -1;
  int64_t tag = 0;
  char* data = nullptr;
  size_t bytes = 0;
  std::shared_ptr<PromiseWork> work;  // null for the engine's own control frames
  Clock::time_point deadline;
  int64_t timeout_ms = 0;  // for messages
  unsigned char header[kHeaderBytes];
  size_t header_sent = 0;
  size_t done = 0;     // payload bytes written
  std::string owned;   // control frame payload (data points here)
};
using OpPtr = std::shared_ptr<Op>;

// A data frame that arrived before its receive (it may still be arriving).
struct Unexpected {
  std::unique_ptr<char[]> data;
  size_t bytes = 0;
  bool complete = false;
};
using UnexpPtr = std::shared_ptr<Unexpected>;

enum class PeerState { open, departed, broken };

// One connection's state: its send queue, the frame being read, posted receives and
// unexpected frames by tag, and (same-host peers) its shared-memory channel.
struct Peer {
  int rank = -1;
  net::Socket sock;
  PeerState state = PeerState::open;
  bool goodbye_queued = false;
  bool closing = false;  // communicator failed: flush control frames, then close
  std::deque<OpPtr> sendq;
  // receive state machine
  unsigned char hdr[kHeaderBytes];
  size_t hdr_got = 0;
  bool in_payload = false;
  bool paused = false;
  FrameHeader cur;
  uint64_t payload_got = 0;
  OpPtr cur_recv;      // direct destination
  UnexpPtr cur_unexp;  // buffered destination
  std::string cur_abort;
  std::unique_ptr<char[]> stage;
  size_t stage_begin = 0, stage_end = 0;
  std::unordered_map<int64_t, std::deque<OpPtr>> posted;
  std::unordered_map<int64_t, std::deque<UnexpPtr>> unexpected;
  // records (comm/net/record_stream.h): every socket peer's frames once its handshake
  // derived keys; null for a shared-memory peer (its socket carries doorbells only)
  std::unique_ptr<net::RecordChannel> rec;
  // shared memory (null: the socket carries the frames)
  ShmChannel* shm = nullptr;
  bool eof_seen = false;  // shm peer: its socket closed; acted on once the ring is drained
  std::string eof_detail;
  // On demand (connector.h): no connection yet; ops queue until adopt() brings one.
  bool unconnected = false;
  bool dial_asked = false;  // this (lower) rank asked the connector to dial it
  bool watch_asked = false; // this (higher) rank asked the connector to watch it
};

// A connection (or a failed dial) handed over by the connector, taken with the inbox.
struct Arrival {
  int peer = -1;
  net::Socket sock;
  std::string error;
};

// Shared by the engine and every Work it hands out, so a Work waited on after its engine
// is gone finds `alive` false (and a valid eventfd) instead of a dangling engine.
struct DriveGate {
  std::mutex owner;                  // held by whoever runs turns: engine thread or driver
  std::atomic<bool> driving{false};  // a driver holds (or is about to take) `owner`
  bool enabled = false;              // TCP-only engine; fixed before the thread starts
  bool alive = true;                 // under owner; false once the engine thread ended
  ProgressEngine::Impl* impl = nullptr;
  int wake_fd = -1;                  // the engine's eventfd, closed with the last holder
  ~DriveGate() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
  // Makes the engine thread (and a driver) leave poll() and look at the inbox.
  void kick() const {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd, &one, sizeof one);
    (void)ignored;
  }
};

enum class DriveResult { drove, busy, not_possible };

// The engine's Work: wait() drives the engine on the waiting thread when it can.
class EngineWork : public PromiseWork {
 public:
  EngineWork(ErrorContext ctx, std::shared_ptr<DriveGate> gate) : PromiseWork(std::move(ctx)), gate_(std::move(gate)) {}
  void wait(Millis timeout) override;

 private:
  std::shared_ptr<DriveGate> gate_;
};

// The engine whose drive scope this thread is in (one at a time), and its depth.
extern thread_local ProgressEngine::Impl* tl_driver;
extern thread_local int tl_drive_depth;

}  // namespace engine

struct ProgressEngine::Impl {
  using Op = engine::Op;
  using OpPtr = engine::OpPtr;
  using Peer = engine::Peer;
  using Clock = engine::Clock;

  EngineConfig cfg;
  std::vector<Peer> peers;
  std::vector<ShmChannelPtr> channels;
  bool any_shm = false;
  ShmChannel* own_inbox = nullptr;  // any channel: they all read this rank's inbox header
  bool shm_progress = false;  // bytes moved through a ring in this loop turn
  Clock::time_point spin_until;
  int wake_fd = -1;  // gate->wake_fd
  std::thread thread;
  std::shared_ptr<engine::DriveGate> gate = std::make_shared<engine::DriveGate>();
  // Threads in a drive scope or driving: while > 0 the engine thread polls only its
  // eventfd (the drivers read the sockets). Changed by drivers, read by the engine.
  std::atomic<int> drivers{0};

  // ---- shared with posting threads (under mu) ----
  std::mutex mu;
  std::condition_variable cv;
  std::vector<OpPtr> inbox;
  std::vector<engine::Arrival> arrivals;
  std::atomic<bool> wake_pending{false};
  // False while the engine spins (it looks at the inbox every turn anyway), so posters
  // skip the eventfd write. Set before the inbox is checked one last time (Dekker).
  std::atomic<bool> may_block{true};
  bool abort_requested = false;
  std::string abort_reason;
  bool abort_handled = false;
  bool shutdown_requested = false;
  Millis shutdown_grace{5000};
  bool exited = false;
  Failure failure_seen;  // copied from the engine thread's state by fail_communicator
  std::atomic<bool> failed_flag{false};
  std::unique_ptr<std::atomic<bool>[]> departed_flags;

  // ---- engine thread only (the owner's) ----
  bool failed = false;
  bool failed_by_abort = false;
  std::string fail_detail;
  Clock::time_point close_deadline;
  bool shutting_down = false;
  Clock::time_point shutdown_deadline;
  uint64_t unexpected_bytes = 0;
  Clock::time_point next_expiry = Clock::now() + engine::kExpiryCheck;
  std::vector<pollfd> drive_fds;  // a driver's poll set (one driver at a time)
  std::vector<int> drive_fd_peer;

  std::atomic<uint64_t> frames_sent{0}, frames_received{0}, bytes_sent{0}, bytes_received{0};
  std::atomic<uint64_t> unexpected_frames{0}, unexpected_peak{0};
  std::atomic<uint64_t> completed_by_waiters{0};
  std::atomic<int> connections{0};

  // ---- posting (progress_engine.cpp) ----
  WorkPtr post(bool is_send, const Buffer& buf, int peer, int64_t tag, Millis timeout);
  void wake();

  // ---- the loop and drivers (engine_loop.cpp) ----
  void run();
  bool prepare_turn();  // steps 1-2 and closing; false once the engine should exit
  void build_fds(std::vector<pollfd>& fds, std::vector<int>& fd_peer, bool sockets);
  void handle_events(const std::vector<pollfd>& fds, const std::vector<int>& fd_peer);
  void on_poll_error(int err);
  void check_expiry();
  void take_inbox();
  bool has_pending_ops() const;
  engine::DriveResult drive(const PromiseWork& w, Clock::time_point deadline);  // under gate->owner
  void hand_back();  // the last driver leaves: wake the engine thread if it has work

  // ---- one connection (engine_peer_io.cpp) ----
  void route(const OpPtr& op);
  void take_arrival(engine::Arrival& a);
  void match_recv(Peer& p, const OpPtr& op);
  bool flush(Peer& p);
  bool flush_records(Peer& p);
  void sent(Peer& p, size_t bytes);  // the front ops' next `bytes` are out (or sealed)
  void on_send_error(Peer& p, int err);
  // Bytes wait to be written to this peer: frames queued, or sealed records.
  static bool has_output(const Peer& p) { return !p.sendq.empty() || (p.rec && !p.rec->writer.idle()); }
  void adopt_socket(Peer& p, net::Socket s);
  bool read_peer(Peer& p);
  bool on_header(Peer& p);
  void deliver(Peer& p, const char* src, size_t n);
  void finish_payload(Peer& p);
  void release_unexpected(size_t bytes);
  void resume_paused();

  // ---- failure, goodbyes, shutdown, deadlines (engine_failure.cpp) ----
  void close_peer(Peer& p);
  void on_connection_lost(Peer& p, const std::string& detail);
  void on_goodbye(Peer& p);
  void fail_communicator(const std::string& detail, bool local_abort, int culprit);
  // Queues an abort frame naming `fail_detail` to an open peer; the loop closes it once the
  // frame is out (or at close_deadline).
  void queue_abort(Peer& p);
  void start_shutdown();
  void expire_ops();
  void fail_leftovers();  // the engine thread ends: whatever is pending fails

  // ---- shared memory (engine_shm.cpp) ----
  bool shm_ops_pending() const;
  void ring_doorbell(Peer& p);
  void drain_doorbells(Peer& p);
  void check_shm_eof(Peer& p);
  // Peers with rings but no connection yet (engine_shm.cpp, "notices"): a failure notice
  // in this rank's inbox fails the communicator; a goodbye flag from such a peer is its
  // departure. The notice costs one load per turn; the flags are read for peers with ops.
  void check_shm_notices();
  bool unconnected_goodbye(Peer& p);
  // This rank failed: tell the same-host peers no abort frame can reach.
  void tell_unconnected_shm_peers(int culprit);
  // The engine thread's poll timeout with rings: 0 while spinning, else `timeout_ms`
  // after arming the rings' sleep flags (`armed` then true).
  int shm_poll_timeout(Clock::time_point now, int timeout_ms, bool& armed);
  int arm_sleep(int timeout_ms);
  void disarm_sleep();  // after poll() returns from an armed sleep

  // ---- completing and failing ops ----
  ErrorContext ctx(const Op& op) const { return cfg.context(op.is_send ? "send" : "recv", op.peer); }
  std::string tag_text(const Op& op) const { return fmt::format("tag {}, {} bytes", op.tag, op.bytes); }
  void complete(const OpPtr& op) {
    if (!op->work) return;
    if (std::this_thread::get_id() != thread.get_id()) ++completed_by_waiters;
    op->work->complete();
  }
  template <class E> void fail(const OpPtr& op, const std::string& detail) {
    if (op->work) op->work->fail(std::make_exception_ptr(E(ctx(*op), detail + " (" + tag_text(*op) + ")")));
  }
  void fail_with_failure(const OpPtr& op) {
    if (failed_by_abort)
      fail<AbortedError>(op, fail_detail);
    else
      fail<PeerError>(op, fail_detail);
  }
  void fail_departed(const OpPtr& op) {
    fail<PeerError>(op, fmt::format("peer rank {} has shut down its communicator (it said goodbye), so this "
                                    "operation can never complete: did the ranks issue different operations?",
                                    op->peer));
  }
};

}  // namespace dpt::tcp
