#pragma once
// Receiving from whichever rank sends first (PyTorch's recv without src), on top of
// point-to-point calls that always name their peer. No PyTorch type appears here.
//
// Terms:
//   envelope  - 8 bytes, the user tag, that every send of a PyTorch program sends to
//               its destination on kEnvelopeTag just before the payload. The payload
//               itself travels on the user tag as it always did.
//   arrived   - per (source, tag), the envelopes received so far: how many messages
//               that source has sent with that tag.
//   claimed   - per (source, tag), the receives posted so far, named (recv with src)
//               or resolved (below). Messages of one (source, tag) are matched in
//               order, so arrived > claimed means one is there for the next receive.
//   resolve   - an any-source receive takes the first source with arrived > claimed
//               (in rank order), claims it and posts a plain receive from it.
//   drain     - one envelope receive is kept posted per peer (after the first use);
//               completed ones are counted and posted again. A receive that expires
//               with nothing to receive is posted again; a failed peer is dropped.
// The any-source receive is a Work: test() and wait() drain and resolve, so it moves
// whenever PyTorch polls or waits on it, and its issue never blocks.
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/communicator.h"

namespace dpt::torch_plugin {

class AnySourceMailbox;

class AnySourceRecv : public Work {
 public:
  AnySourceRecv(AnySourceMailbox& box, Buffer buf, int64_t tag, Millis timeout, ErrorContext ctx);
  bool test() override;
  void wait(Millis timeout) override;
  int source() const;  // -1 until resolved

 private:
  friend class AnySourceMailbox;
  AnySourceMailbox& box_;
  Buffer buf_;
  int64_t tag_;
  std::chrono::steady_clock::time_point deadline_;
  ErrorContext ctx_;
  mutable std::mutex mu_;
  int source_ = -1;
  WorkPtr payload_;
};

class AnySourceMailbox {
 public:
  static constexpr int64_t kEnvelopeTag = Communicator::kMaxUserTag;

  explicit AnySourceMailbox(Communicator& comm);
  // The envelope and the payload (wait on both).
  std::vector<WorkPtr> send(const Buffer& buf, int dst, int64_t tag);
  WorkPtr recv(const Buffer& buf, int src, int64_t tag);
  std::shared_ptr<AnySourceRecv> recv_any(const Buffer& buf, int64_t tag);

 private:
  friend class AnySourceRecv;
  void progress();  // drain, then resolve pending receives in issue order
  void drain_locked();
  Communicator& comm_;
  std::mutex mu_;
  bool draining_ = false;
  std::vector<WorkPtr> envelope_recv_;   // per peer
  std::vector<int64_t> envelope_slot_;   // per peer: where its next envelope lands
  std::vector<std::exception_ptr> peer_error_;
  std::map<std::pair<int, int64_t>, int64_t> arrived_, claimed_;
  std::deque<std::weak_ptr<AnySourceRecv>> pending_;
};

}  // namespace dpt::torch_plugin
