// DiLoCo under `launch --elastic` (docs/diloco.md). A membership change takes effect at
// a round's end: every rank keeps the state of the last round's end (the trainer asks
// for a snapshot after each outer step), and when a member dies mid-round the new group
// starts again from the newest such state any member holds. The unfinished round's
// inner steps are dropped and its samples trained again by the new group (the trainer
// goes on from the snapshot's sample position), so no sample of a completed round is
// lost or trained twice. Newcomers wait for a round's end (accepts_members_now).
//
// At a round's end every worker's parameters equal theta (no overlap under elastic) and
// every rank's buffers are the groups' average (DilocoStrategy::average_buffers), so the
// snapshot holds both whole; the outer momentum is allgathered within the group (one
// host) to be whole too; the inner optimizer state is this worker's own.
#include <algorithm>

#include "comm/store/elastic_membership.h"
#include "parallel/diloco/diloco_strategy.h"

namespace dpt {

struct DilocoStrategy::Snapshot : CarriedState {
  ElasticProgress at;
  std::vector<float> params;                    // = theta, whole
  std::vector<float> buffers;                   // the same on every rank at a round's end
  std::vector<float> momentum;                  // the outer momentum, whole (empty without momentum)
  int64_t outer_steps = 0, rounds = 0;
  std::vector<std::pair<std::string, std::vector<float>>> inner;  // this worker's inner optimizer state
  int64_t inner_steps = 0;
};

void DilocoStrategy::elastic_snapshot(const ElasticProgress& at, int, int) {
  if (config_.overlap_steps > 0)
    throw std::invalid_argument("DiLoCo: elastic re-forming needs the blocking outer exchange (--outer-overlap-steps 0)");
  if (at.step % config_.inner_steps != 0) return;  // only a round's end is a state every worker shares
  auto s = std::make_shared<Snapshot>();
  s->at = at;
  const auto params = model_.flat_params();
  s->params.assign(params.begin(), params.end());
  const auto buffers = model_.flat_buffers();
  s->buffers.assign(buffers.begin(), buffers.end());
  auto outer = exchange_->outer_state();
  if (!outer.empty()) {
    const std::span<float> mine = outer.front().second;
    const size_t g = size_t(inner_comm_->size()), chunk = (params.size() + g - 1) / g;
    std::vector<float> padded(chunk, 0.0f), all(g * chunk);
    std::copy(mine.begin(), mine.end(), padded.begin());
    inner_comm_->allgather(Buffer{padded.data(), chunk, DType::f32, {}}, Buffer{all.data(), all.size(), DType::f32, {}});
    s->momentum.assign(all.begin(), all.begin() + std::ptrdiff_t(params.size()));
  }
  s->outer_steps = exchange_->outer_optimizer().step_count();
  s->rounds = exchange_->rounds();
  for (auto& [name, span] : inner_->optimizer().state_buffers()) s->inner.emplace_back(name, std::vector<float>(span.begin(), span.end()));
  s->inner_steps = inner_->optimizer().step_count();
  snapshot_ = std::move(s);
}

CarriedStatePtr DilocoStrategy::carry_out() { return snapshot_; }

void DilocoStrategy::carry_in(const CarriedStatePtr& state) {
  if (!state) return;  // a member that never reached a round's end carries nothing
  auto s = std::dynamic_pointer_cast<const Snapshot>(state);
  if (!s) throw std::logic_error("DiLoCo: the carried state is not DiLoCo's (another strategy's)");
  snapshot_ = std::const_pointer_cast<Snapshot>(s);
}

ElasticProgress DilocoStrategy::adopt_group_state(const GroupChange&) {
  // The source: the member with the newest round end (lowest rank on a tie).
  const int n = comm_->size();
  const Snapshot* mine = snapshot_.get();
  int64_t me[3] = {mine ? mine->at.step : -1, mine ? int64_t(mine->at.epoch) : 0, mine ? int64_t(mine->at.position) : 0};
  std::vector<int64_t> all(size_t(3 * n));
  comm_->allgather(make_buffer(me, 3), make_buffer(all.data(), all.size()));
  int root = 0;
  for (int r = 1; r < n; ++r)
    if (all[size_t(3 * r)] > all[size_t(3 * root)]) root = r;
  const int64_t step = all[size_t(3 * root)];
  if (step < 0) throw ElasticError("elastic: no member of the new group holds a DiLoCo round's end");
  const ElasticProgress at{step, int(all[size_t(3 * root + 1)]), size_t(all[size_t(3 * root + 2)])};

  // theta (= every worker's parameters at that round's end) and the outer state.
  const auto params = model_.flat_params();
  // Every holder of that round end has theta already (all workers equal it there): the
  // model crosses the links only to members that lack it (newcomers).
  if (mine && mine->at.step == step) std::copy(mine->params.begin(), mine->params.end(), params.begin());
  broadcast_where_differs(*comm_, params, "DiLoCo", root);
  exchange_->reset_theta(params);
  // The buffers of that round end likewise (a newcomer's, and a holder's mid-round ones, replaced).
  if (!model_.buffer_infos().empty()) {
    const auto buffers = model_.flat_buffers();
    if (mine && mine->at.step == step && mine->buffers.size() == buffers.size())
      std::copy(mine->buffers.begin(), mine->buffers.end(), buffers.begin());
    broadcast_where_differs(*comm_, buffers, "DiLoCo (buffers)", root);
  }
  int64_t counts[2] = {mine && comm_->rank() == root ? mine->outer_steps : 0, mine && comm_->rank() == root ? mine->rounds : 0};
  comm_->broadcast(make_buffer(counts, 2), root);
  exchange_->outer_optimizer().set_step_count(counts[0]);
  exchange_->set_rounds(counts[1]);
  auto outer = exchange_->outer_state();
  if (!outer.empty()) {
    std::vector<float> momentum(params.size(), 0.0f);
    if (mine && mine->at.step == step && mine->momentum.size() == momentum.size()) momentum = mine->momentum;  // whole on every holder
    broadcast_where_differs(*comm_, momentum, "DiLoCo (outer momentum)", root);
    const std::span<float> slice = outer.front().second;
    std::copy(momentum.begin() + std::ptrdiff_t(exchange_->lo()), momentum.begin() + std::ptrdiff_t(exchange_->hi()), slice.begin());
  }

  // The inner optimizer state: each new group takes it from its first member that holds
  // that round's end (a worker's own state); a group of newcomers starts it afresh.
  const bool holds = mine && mine->at.step == step;
  std::vector<int64_t> holders(size_t(inner_comm_->size()));
  int64_t h = holds ? 1 : 0;
  inner_comm_->allgather(make_buffer(&h, 1), make_buffer(holders.data(), holders.size()));
  const auto src = std::find(holders.begin(), holders.end(), 1);
  Optimizer& opt = inner_->optimizer();
  auto state = opt.state_buffers();
  if (src == holders.end()) {
    for (auto& [name, span] : state) std::fill(span.begin(), span.end(), 0.0f);
    opt.set_step_count(0);
  } else {
    const int from = int(src - holders.begin());
    int64_t inner_steps = 0;
    if (inner_comm_->rank() == from) {
      for (auto& [name, span] : state)
        for (auto& [carried, values] : mine->inner)
          if (carried == name && values.size() == span.size()) std::copy(values.begin(), values.end(), span.begin());
      inner_steps = mine->inner_steps;
    }
    for (auto& [name, span] : state) inner_comm_->broadcast(Buffer{span.data(), span.size(), DType::f32, {}}, from);
    inner_comm_->broadcast(make_buffer(&inner_steps, 1), from);
    opt.set_step_count(inner_steps);
  }
  steps_ = step;
  begun_at_ = step;
  return at;
}

}  // namespace dpt
