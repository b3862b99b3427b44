#include "bindings/torch/any_source_mailbox.h"

#include <thread>

namespace dpt::torch_plugin {

using Clock = std::chrono::steady_clock;

namespace {
// A send whose 8-byte envelope must outlive the operation.
class EnvelopeSend : public Work {
 public:
  EnvelopeSend(Communicator& comm, int dst, int64_t tag)
      : value_(std::make_unique<int64_t>(tag)),
        inner_(comm.isend(make_buffer(value_.get(), 1), dst, AnySourceMailbox::kEnvelopeTag)) {}
  bool test() override { return inner_->test(); }
  void wait(Millis t) override { inner_->wait(t); }

 private:
  std::unique_ptr<int64_t> value_;
  WorkPtr inner_;
};
}  // namespace

AnySourceMailbox::AnySourceMailbox(Communicator& comm)
    : comm_(comm),
      envelope_recv_(size_t(comm.size())),
      envelope_slot_(size_t(comm.size())),
      peer_error_(size_t(comm.size())) {}

std::vector<WorkPtr> AnySourceMailbox::send(const Buffer& buf, int dst, int64_t tag) {
  std::vector<WorkPtr> w;
  w.push_back(std::make_shared<EnvelopeSend>(comm_, dst, tag));
  w.push_back(comm_.isend(buf, dst, tag));
  return w;
}

WorkPtr AnySourceMailbox::recv(const Buffer& buf, int src, int64_t tag) {
  std::lock_guard<std::mutex> lk(mu_);
  ++claimed_[{src, tag}];
  if (draining_) drain_locked();
  return comm_.irecv(buf, src, tag);
}

std::shared_ptr<AnySourceRecv> AnySourceMailbox::recv_any(const Buffer& buf, int64_t tag) {
  auto r = std::make_shared<AnySourceRecv>(*this, buf, tag, comm_.timeout(), comm_.context("recv"));
  {
    std::lock_guard<std::mutex> lk(mu_);
    draining_ = true;
    pending_.push_back(r);
  }
  progress();
  return r;
}

void AnySourceMailbox::drain_locked() {
  for (int p = 0; p < comm_.size(); ++p) {
    if (p == comm_.rank() || peer_error_[p]) continue;
    for (;;) {
      WorkPtr& w = envelope_recv_[p];
      if (!w) {
        w = comm_.irecv(make_buffer(&envelope_slot_[p], 1), p, kEnvelopeTag);
        continue;
      }
      bool done = false;
      try {
        done = w->test();
      } catch (const TimeoutError&) {
        w.reset();  // nothing came within the timeout: listen again
        continue;
      } catch (...) {
        peer_error_[p] = std::current_exception();
        w.reset();
        break;
      }
      if (!done) break;
      ++arrived_[{p, envelope_slot_[p]}];
      w.reset();
    }
  }
}

void AnySourceMailbox::progress() {
  std::lock_guard<std::mutex> lk(mu_);
  drain_locked();
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto r = it->lock();
    if (!r) {
      it = pending_.erase(it);
      continue;
    }
    int from = -1;
    for (int p = 0; p < comm_.size() && from < 0; ++p)
      if (arrived_[{p, r->tag_}] > claimed_[{p, r->tag_}]) from = p;
    if (from < 0) {
      ++it;
      continue;
    }
    ++claimed_[{from, r->tag_}];
    WorkPtr payload = comm_.irecv(r->buf_, from, r->tag_);
    {
      std::lock_guard<std::mutex> rl(r->mu_);
      r->source_ = from;
      r->payload_ = std::move(payload);
    }
    it = pending_.erase(it);
  }
}

AnySourceRecv::AnySourceRecv(AnySourceMailbox& box, Buffer buf, int64_t tag, Millis timeout, ErrorContext ctx)
    : box_(box), buf_(buf), tag_(tag), deadline_(Clock::now() + timeout), ctx_(std::move(ctx)) {}

int AnySourceRecv::source() const {
  std::lock_guard<std::mutex> lk(mu_);
  return source_;
}

bool AnySourceRecv::test() {
  WorkPtr payload;
  {
    std::lock_guard<std::mutex> lk(mu_);
    payload = payload_;
  }
  if (!payload) {
    box_.progress();
    std::lock_guard<std::mutex> lk(mu_);
    payload = payload_;
  }
  if (payload) return payload->test();
  if (Clock::now() >= deadline_)
    throw TimeoutError(ctx_, "no rank sent a message with tag " + std::to_string(tag_) + " to this receive from any source");
  return false;
}

void AnySourceRecv::wait(Millis timeout) {
  const auto until = Clock::now() + timeout;
  auto nap = std::chrono::microseconds(50);
  while (source() < 0) {
    if (test()) return;
    if (Clock::now() >= until)
      throw TimeoutError(ctx_, "waited " + std::to_string(timeout.count()) + " ms for a message with tag " +
                                   std::to_string(tag_) + " from any source");
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(2000));
  }
  WorkPtr payload;
  {
    std::lock_guard<std::mutex> lk(mu_);
    payload = payload_;
  }
  payload->wait(std::max(Millis(0), std::chrono::duration_cast<Millis>(until - Clock::now())));
}

}  // namespace dpt::torch_plugin
