#pragma once
// The tcp backend's progress engine: one thread that owns every peer connection of a
// communicator and moves all its bytes with non-blocking sockets and poll().
//
// Terms:
//   op          - a posted send or receive: buffer, peer, tag, Work, deadline.
//   submission  - ops are posted from any thread into a locked inbox, and the engine
//                 thread is woken through an eventfd; everything else (queues, sockets,
//                 matching) belongs to the engine thread alone, so it needs no locks.
//   send queue  - per peer, FIFO; frames are written with sendmsg() gathering the
//                 headers and payloads of several queued ops (small messages batch).
//   posted      - per (peer, tag), FIFO of receives waiting for a frame.
//   unexpected  - per (peer, tag), FIFO of frames that arrived before their receive;
//                 buffered up to COMM_TCP_MAX_UNEXPECTED_BYTES in total. Beyond that the
//                 engine stops reading that peer (TCP flow control pushes back) until a
//                 matching receive is posted.
//   direct      - a frame whose receive is already posted is read straight into the
//                 user's buffer (no copy); small frames go through a staging buffer so
//                 one recv() picks up many of them.
//   broken      - a peer whose connection closed without a goodbye, reset, sent an
//                 invalid frame or an abort frame. Every pending and later op fails with
//                 PeerError naming it, and the engine tells all other peers (abort frame)
//                 so the whole group fails within milliseconds instead of at a timeout.
//   departed    - a peer that sent a goodbye (clean shutdown): later ops with it fail,
//                 but nothing else is disturbed.
//   shm peer    - a same-host peer with a shared-memory channel (shm_channel.h): its
//                 frames travel through the channel's rings instead of the socket; the
//                 socket then carries only doorbell bytes (wake-ups) and, by closing,
//                 tells that the peer is gone. The socket is made on demand like any
//                 other (connector.h); until it arrives the rings are not touched. While rings are busy the engine spins
//                 (poll with timeout 0, sched_yield) for EngineConfig::shm_spin after
//                 the last byte moved while ops wait on a ring, then arms the rings'
//                 sleep flags and blocks in poll().
//   driver      - a thread that waits on one of the engine's Works runs the engine's
//                 turns itself (poll, sendmsg, recv) until its Work is done, instead of
//                 sleeping until the engine thread hands the result over: a message then
//                 costs no thread wake-up on either side. One driver at a time (the
//                 engine thread owns the state only between drivers); TCP-only engines
//                 (shared-memory rings keep the engine thread's spin logic).
//   drive scope - begin_drive()/end_drive() around a collective on one thread: its posts
//                 do not ring the engine thread, and the engine thread watches only its
//                 eventfd, so the collective's messages wake nobody but the driver.
// Each op also has an engine-side deadline (the communicator's timeout): when it
// passes, the op fails with TimeoutError and its buffer is no longer referenced.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/tcp/shm_channel.h"
#include "comm/error.h"
#include "comm/net/socket.h"
#include "comm/types.h"
#include "comm/work.h"

namespace dpt::tcp {

struct EngineConfig {
  int rank = 0;
  int world = 1;
  uint64_t max_frame_bytes = uint64_t{1} << 30;
  uint64_t max_unexpected_bytes = uint64_t{256} << 20;
  Millis op_timeout{300000};
  // Shared memory: how long to spin (poll without blocking) after the last byte moved
  // through a ring while ops wait on one, before sleeping until a doorbell.
  std::chrono::microseconds shm_spin{200};
  // Threads waiting on a Work run the engine's turns themselves (drivers, above);
  // COMM_TCP_DRIVE=0 leaves all socket I/O to the engine thread.
  bool waiters_drive = true;
  // Builds the error context for an op ("send"/"recv") with a peer.
  std::function<ErrorContext(const std::string& op, int peer)> context;
  // Connections on demand (connector.h): asks for a connection to the higher rank
  // `peer`, which arrives later through adopt(). Null: peers without a connection at
  // construction are broken (a full mesh was expected).
  std::function<void(int peer, Millis timeout)> dial;
  // Called once for a lower rank `peer` an op waits for before it has connected: the
  // connector probes whether it still lives (connector.h, "watch"). Null: not watched.
  std::function<void(int peer)> watch;
};

class ProgressEngine {
 public:
  // Takes the mesh's connections (peers[rank] is empty; with EngineConfig::dial others
  // may be empty too: connected on demand), and the shared-memory channels of same-host
  // peers (null entries: TCP only), and starts the engine thread.
  ProgressEngine(EngineConfig cfg, std::vector<net::Socket> peers, std::vector<ShmChannelPtr> shm = {});
  ~ProgressEngine();  // shutdown(grace = 5 s) if not done yet
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Non-blocking and thread-safe; the Work completes on the engine thread, or on the
  // thread that waits on it (a driver). The op fails with TimeoutError after `timeout`
  // (default: EngineConfig::op_timeout).
  WorkPtr isend(const Buffer& buf, int peer, int64_t tag, Millis timeout = Millis(0));
  WorkPtr irecv(const Buffer& buf, int peer, int64_t tag, Millis timeout = Millis(0));

  // A drive scope on the calling thread (nests; see the terms above). No-op when the
  // engine has shared-memory peers.
  void begin_drive();
  void end_drive();

  // A connection made on demand, or (error not empty) the failure to make it: the peer
  // is then broken and the communicator fails naming it. Thread-safe.
  void adopt(int peer, net::Socket sock, const std::string& error);

  // Fails every pending and later op with AbortedError and tells the peers. Returns
  // once the engine no longer touches any user buffer.
  void abort(const std::string& reason);
  // Clean end: queued sends are flushed, each peer gets a goodbye, sockets are closed,
  // ops still pending after `grace` fail with AbortedError. Joins the thread.
  void shutdown(Millis grace);

  // For threads that move bytes outside the engine (the shared-memory collectives,
  // shm_arena.h) and must stop waiting on peers once the engine knows they are gone:
  // the communicator failed (a peer died or sent an abort, or abort() was called), or a
  // peer said goodbye. has_failed() and departed() are one atomic load each.
  struct Failure {
    bool by_abort = false;  // abort() on this rank, not a peer
    int culprit = -1;       // the peer that failed, when known
    std::string detail;
  };
  bool has_failed() const;
  Failure failure() const;  // meaningful once has_failed()
  bool departed(int peer) const;

  struct Stats {
    uint64_t frames_sent = 0, frames_received = 0, bytes_sent = 0, bytes_received = 0;
    uint64_t unexpected_frames = 0, unexpected_peak_bytes = 0;
    uint64_t completed_by_waiters = 0;  // ops a driver completed (not the engine thread)
    int shm_peers = 0;
    int connections = 0;  // TCP connections to peers ever made: at the build and on demand
  };
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpt::tcp
