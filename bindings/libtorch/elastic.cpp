// dpt::torch::ElasticLoop (dpt/torch/elastic.h): the user's steps, and after a
// communication failure the re-forming of api/context_elastic.h plus the state of the
// DDP wrapper and the libtorch optimizer from the most advanced member.
//
// Terms:
//   completed  steps whose step function returned on this rank; a failed step is not.
//   source     the member with the most completed steps (lowest rank on a tie), as in
//              train --elastic (DdpStrategy::adopt_group_state): every DDP member holds
//              the whole state, and one that completed the failed step holds it after
//              that step.
#include "dpt/torch/elastic.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "api/context_elastic.h"
#include "api/trainer/elastic_setup.h"
#include "comm/error.h"

namespace dpt::torch {
namespace {

using Clock = std::chrono::steady_clock;
const std::string kWho = "dpt::torch::ElasticLoop";

// A failure the group can re-form after: the communication errors of a dead, hung or
// unreachable peer, not a misuse or a mismatch every generation would repeat.
bool peer_failure(const std::exception& e) {
  const auto* c = dynamic_cast<const CommError*>(&e);
  return c && !dynamic_cast<const UsageError*>(&e) && !dynamic_cast<const MismatchError*>(&e);
}

const std::string kNewcomers = "newcomers are waiting to join";

std::string comma_list(const std::vector<std::string>& ids) {
  std::string s;
  for (const std::string& id : ids) s += (s.empty() ? "" : ", ") + id;
  return s;
}

}  // namespace

struct ElasticLoop::Impl {
  Impl(Reducer& r, ::torch::optim::Optimizer& o) : reducer(r), ctx(r.context()), optimizer(o) {}

  Reducer& reducer;
  Context::Impl& ctx;
  ::torch::optim::Optimizer& optimizer;
  std::function<void(const ElasticReform&)> on_reform;
  int64_t completed = 0;
  bool running = false;
  ElasticSummary summary;
  Clock::time_point last_join_check{};

  Communicator& comm() { return *ctx.comm; }

  // The optimizer's state from `root`, through libtorch's own serialisation.
  void broadcast_optimizer(int root) {
    std::string bytes;
    if (comm().rank() == root) {
      ::torch::serialize::OutputArchive archive;
      optimizer.save(archive);
      std::ostringstream out;
      archive.save_to(out);
      bytes = out.str();
    }
    int64_t n = static_cast<int64_t>(bytes.size());
    comm().broadcast(make_buffer(&n, 1), root);
    bytes.resize(static_cast<size_t>(n));
    comm().broadcast(Buffer{bytes.data(), bytes.size(), DType::u8, {}}, root);
    if (comm().rank() == root) return;
    std::istringstream in(bytes);
    ::torch::serialize::InputArchive archive;
    archive.load_from(in);
    optimizer.load(archive);
  }

  // Collective over the new generation: the source's state everywhere; returns the
  // steps the group gave up (the newest any member completed minus the source's: 0).
  int64_t take_group_state() {
    const int n = comm().size();
    std::vector<int64_t> all(static_cast<size_t>(n));
    comm().allgather(make_buffer(&completed, 1), make_buffer(all.data(), all.size()));
    int root = 0;
    for (int r = 1; r < n; ++r)
      if (all[size_t(r)] > all[size_t(root)]) root = r;
    reducer.broadcast_state(root);
    broadcast_optimizer(root);
    int64_t newest = completed;
    comm().allreduce(make_buffer(&newest, 1), ReduceOp::max);
    completed = all[size_t(root)];
    return newest - completed;
  }

  void reform(std::string why) {
    const Clock::time_point t0 = Clock::now();
    const Membership before = membership(ctx, kWho);
    std::fprintf(stderr, "elastic: leaving generation %d as rank %d: %s\n", before.generation, before.rank, why.c_str());
    const int64_t lost = arrive_and_take_state(why);
    ++summary.recoveries;
    summary.lost_steps += lost;
    report(before, t0, why, lost);
  }

  // The next generation (the communicator aborted first: the buckets in flight end at
  // once, and peers blocked on this rank fail) and its state; again while a member dies
  // as the group takes it. Returns the steps given up.
  int64_t arrive_and_take_state(std::string& why) {
    for (;;) {
      comm().abort("elastic: leaving generation " + std::to_string(membership(ctx, kWho).generation) + ": " + why);
      reducer.abandon_backward();
      next_generation(ctx, why, kWho);
      try {
        return take_group_state();
      } catch (const std::exception& e) {
        if (!peer_failure(e)) throw;
        why = std::string("re-forming again: ") + e.what();
      }
    }
  }

  // Before a step: restarted processes waiting to join? Rank 0 asks the store at most
  // twice a second and broadcasts the answer; a group at launch's MAX asks nothing.
  bool newcomers_waiting() {
    train::ElasticSetup& e = *ctx.elastic;
    if (comm().size() >= e.rendezvous->limits().max) return false;
    int32_t admit = 0;
    if (comm().rank() == 0 && Clock::now() - last_join_check >= std::chrono::milliseconds(500)) {
      last_join_check = Clock::now();
      admit = e.rendezvous->arrivals_waiting(e.membership.generation + 1) ? 1 : 0;
    }
    if (comm().size() > 1) comm().broadcast(make_buffer(&admit, 1), 0);
    return admit != 0;
  }

  // Every member takes the newcomers in at this step boundary.
  void grow() {
    const Clock::time_point t0 = Clock::now();
    const Membership before = membership(ctx, kWho);
    std::string why = kNewcomers;
    const int64_t lost = arrive_and_take_state(why);
    if (why == kNewcomers) {
      ++summary.joins;
    } else {  // a member died while the group formed: a recovery after all
      ++summary.recoveries;
      summary.lost_steps += lost;
    }
    report(before, t0, why, lost);
  }

  // A restarted process, taken in by dpt::init: the members' state before its first step.
  void join() {
    const Clock::time_point t0 = Clock::now();
    const Membership& m = membership(ctx, kWho);
    try {
      take_group_state();
    } catch (const std::exception& e) {
      if (!peer_failure(e)) throw;
      reform(std::string("joining: ") + e.what());
      return;
    }
    // Members rank first, so a newcomer is never rank 0: it says so itself.
    std::printf("elastic: joined generation %d as rank %d of %d, at step %lld (%.2f s)\n", m.generation, m.rank,
                m.size(), (long long)completed, std::chrono::duration<double>(Clock::now() - t0).count());
    std::fflush(stdout);
  }

  void report(const Membership& before, Clock::time_point t0, const std::string& why, int64_t lost) {
    const Membership& m = membership(ctx, kWho);
    ElasticReform r;
    r.generation = m.generation;
    r.rank = m.rank;
    r.world_size = m.size();
    for (const std::string& id : before.ids)
      if (std::find(m.ids.begin(), m.ids.end(), id) == m.ids.end()) r.lost.push_back(id);
    for (const std::string& id : m.ids)
      if (std::find(before.ids.begin(), before.ids.end(), id) == before.ids.end()) r.joined.push_back(id);
    r.next_step = completed;
    r.lost_steps = lost;
    r.recovery_s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.reason = why;
    if (r.rank == 0) {
      std::printf("elastic: generation %d: world size %d (lost [%s], joined [%s]); resuming at step %lld, %lld step(s) "
                  "lost, %.2f s\n",
                  r.generation, r.world_size, comma_list(r.lost).c_str(), comma_list(r.joined).c_str(), (long long)r.next_step,
                  (long long)lost, r.recovery_s);
      std::fflush(stdout);
    }
    if (on_reform) on_reform(r);
  }
};

ElasticLoop::ElasticLoop(Reducer& reducer, ::torch::optim::Optimizer& optimizer)
    : impl_(std::make_unique<Impl>(reducer, optimizer)) {
  membership(impl_->ctx, kWho);  // not elastic: the error says how to make it so
  if (reducer.reduces_to_owners())
    throw std::logic_error(kWho + ": the DDP wrapper reduces gradients to a ZeroRedundancyOptimizer's owners; "
                                  "elastic recovery does not rebuild ZeRO shards yet: use a torch::optim optimizer "
                                  "over all the parameters");
}

ElasticLoop::~ElasticLoop() = default;

void ElasticLoop::on_reform(std::function<void(const ElasticReform&)> callback) { impl_->on_reform = std::move(callback); }

int64_t ElasticLoop::completed() const { return impl_->completed; }

ElasticSummary ElasticLoop::run(int64_t steps, const std::function<void(const ElasticStep&)>& step) {
  Impl& d = *impl_;
  if (!step) throw std::invalid_argument(kWho + "::run: the step function is empty");
  if (d.running) throw std::logic_error(kWho + "::run: called from inside a step");
  d.running = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{d.running};
  if (d.ctx.elastic->joining) {
    d.ctx.elastic->joining = false;
    d.join();
  }
  for (;;) {
    if (d.completed >= steps) {
      // Every member must be done before any returns: one that failed the last step after
      // another completed it needs that one's state, which leaves with its process.
      try {
        d.comm().barrier();
        break;
      } catch (const std::exception& e) {
        if (!peer_failure(e)) throw;
        d.reform(e.what());
        continue;
      }
    }
    try {
      if (d.newcomers_waiting()) {
        d.grow();
        continue;
      }
    } catch (const std::exception& e) {
      if (!peer_failure(e)) throw;
      d.reform(e.what());
      continue;
    }
    const Membership& m = membership(d.ctx, kWho);
    try {
      step(ElasticStep{d.completed, m.rank, m.size(), m.generation});
      ++d.completed;
    } catch (const std::exception& e) {
      // Out of loss.backward() the reducer's error may come wrapped by autograd's engine.
      const std::exception_ptr in_backward = d.reducer.take_comm_failure();
      if (peer_failure(e)) {
        d.reform(e.what());
        continue;
      }
      if (!in_backward) throw;
      try {
        std::rethrow_exception(in_backward);
      } catch (const std::exception& inner) {
        if (!peer_failure(inner)) throw;
        d.reform(inner.what());
      }
    }
  }
  mark_elastic_done(d.ctx);
  d.summary.steps = d.completed;
  d.summary.world_size = d.comm().size();
  d.summary.generation = membership(d.ctx, kWho).generation;
  return d.summary;
}

}  // namespace dpt::torch
