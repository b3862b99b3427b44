// dist.monitored_barrier on the dpt backend: a barrier that names the ranks that did not
// reach it. Every other rank sends rank 0 one byte and waits for one back; rank 0 receives
// from each rank in turn within the timeout, then answers all. What PyTorch's tests of
// Gloo's monitored barrier match on is said the same way here:
//   rank 0:    "Rank 1 failed to pass monitoredBarrier in 2000 ms" (with wait_all_ranks
//              every late rank: "Ranks 1, 2 failed ..."), or, when its time is gone before
//              a rank's turn, "Rank 0 timed out in monitoredBarrier after 0 ms";
//   the others: "Rank 2 successfully reached monitoredBarrier, but received errors while
//              waiting for send/recv from rank 0" when rank 0 does not answer.
#include <thread>

#include "bindings/torch/process_group_dpt.h"

namespace dpt::torch_plugin {

namespace {
using Clock = std::chrono::steady_clock;

// True once `w` is done, false when `deadline` passed first; throws the op's error.
bool done_by(const WorkPtr& w, Clock::time_point deadline) {
  for (;;) {
    if (w->test()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(Millis(1));
  }
}

std::string ms(Millis t) { return std::to_string(t.count()) + " ms"; }
}  // namespace

void ProcessGroupDpt::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  const Millis timeout = opts.timeout.count() >= 0 ? Millis(opts.timeout.count()) : comm_->wait_timeout();
  const int64_t tag = kMonitoredBarrierTag + monitored_barriers_++ % (AnySourceMailbox::kEnvelopeTag - kMonitoredBarrierTag);
  const auto start = Clock::now();
  const auto byte = [] { return std::make_shared<uint8_t>(0); };
  const auto buffer = [](const std::shared_ptr<uint8_t>& b) { return Buffer{b.get(), 1, DType::u8, {}}; };

  if (rank_ != 0) {
    auto out = byte(), in = byte();
    WorkPtr sent = comm_->isend(buffer(out), 0, tag), got = comm_->irecv(buffer(in), 0, tag);
    bool ok = false;
    std::string why;
    try {
      ok = done_by(sent, start + timeout) && done_by(got, start + timeout);
    } catch (const std::exception& e) {
      why = std::string(": ") + e.what();
    }
    if (!ok) {
      abandoned_.emplace_back(out, sent);
      abandoned_.emplace_back(in, got);
      throw std::runtime_error("Rank " + std::to_string(rank_) +
                               " successfully reached monitoredBarrier, but received errors while waiting for send/recv "
                               "from rank 0 within " + ms(timeout) + why + ". Please check rank 0's error for the faulty rank.");
    }
    return;
  }

  std::vector<int> late;
  for (int p = 1; p < size_; ++p) {
    // With wait_all_ranks every rank gets the whole timeout, else they share it.
    const auto deadline = wait_all_ranks ? Clock::now() + timeout : start + timeout;
    if (!wait_all_ranks && Clock::now() >= deadline)
      throw std::runtime_error("Rank 0 timed out in monitoredBarrier after " + ms(timeout) + ", before hearing from rank " +
                               std::to_string(p) + " (ranks 1 to " + std::to_string(p - 1) + " arrived)");
    auto in = byte();
    WorkPtr got = comm_->irecv(buffer(in), p, tag);
    bool ok = false;
    try {
      ok = done_by(got, deadline);
    } catch (const std::exception&) {
    }
    if (ok) continue;
    abandoned_.emplace_back(in, got);
    if (!wait_all_ranks)
      throw std::runtime_error("Rank " + std::to_string(p) + " failed to pass monitoredBarrier in " + ms(timeout));
    late.push_back(p);
  }
  if (!late.empty()) {
    std::string list;
    for (int p : late) list += (list.empty() ? "" : ", ") + std::to_string(p);
    throw std::runtime_error((late.size() == 1 ? "Rank " : "Ranks ") + list + " failed to pass monitoredBarrier in " +
                             ms(timeout));
  }
  // Everyone arrived: release them.
  std::vector<std::pair<std::shared_ptr<uint8_t>, WorkPtr>> acks;
  for (int p = 1; p < size_; ++p) {
    auto out = byte();
    acks.emplace_back(out, comm_->isend(buffer(out), p, tag));
  }
  for (auto& [b, w] : acks) w->wait(comm_->wait_timeout());
}

}  // namespace dpt::torch_plugin
