// DiLoCo's checkpoint files: model.diloco.rank<R>.safetensors, one per rank, beside the
// model file (which holds rank 0's worker). Mid-round the workers differ, so each rank
// keeps its own parameters, buffers (BatchNorm's running statistics: its group's between
// round ends) and inner optimizer state, its slices of theta and of the outer momentum,
// and an exchange in flight (its average, waited for, and the round's end under overlap):
// a resume continues bit for bit. It needs the same world and groups. A rank file without
// buffers (written before they were kept) leaves the model file's, rank 0's.
#include <filesystem>

#include "models/io/checkpoint.h"
#include "models/io/safetensors.h"
#include "parallel/diloco/diloco_strategy.h"

namespace dpt {

namespace {
std::string rank_file(const std::string& model_path, int rank) {
  return sidecar_path(model_path, "diloco.rank" + std::to_string(rank));
}

int64_t meta_int(const Metadata& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) throw CheckpointError(path, "metadata '" + key + "' is missing (not a DiLoCo rank file?)");
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    throw CheckpointError(path, "metadata '" + key + "' is '" + it->second + "', not an integer");
  }
}

const NamedTensor& tensor(const SafetensorsContents& c, const std::string& name, size_t numel, const std::string& path) {
  const NamedTensor* t = c.find(name);
  if (!t) throw CheckpointError(path, "tensor '" + name + "' is missing");
  if (t->data.size() != numel)
    throw CheckpointError(path, "tensor '" + name + "' has " + std::to_string(t->data.size()) + " elements, this run " +
                                    std::to_string(numel));
  return *t;
}
}  // namespace

void DilocoStrategy::save_optimizer_state(const std::string& model_path) {
  // An exchange in flight is waited for: its average is part of the state (the
  // uninterrupted run applies the same values D steps after the round's end).
  exchange_->wait_average();
  std::vector<NamedTensorView> t;
  const auto params = model_.flat_params();
  t.push_back({"params", {int64_t(params.size())}, params});
  const auto buffers = model_.flat_buffers();
  if (!buffers.empty()) t.push_back({"buffers", {int64_t(buffers.size())}, buffers});
  for (auto& [name, span] : inner_->optimizer().state_buffers()) t.push_back({"inner." + name, {int64_t(span.size())}, span});
  t.push_back({"theta", {int64_t(exchange_->theta().size())}, exchange_->theta()});
  for (auto& [name, span] : exchange_->outer_state()) t.push_back({"outer." + name, {int64_t(span.size())}, span});
  if (exchange_->in_flight()) {
    t.push_back({"average", {int64_t(exchange_->average().size())}, exchange_->average()});
    if (!exchange_->round_end().empty()) t.push_back({"round_end", {int64_t(exchange_->round_end().size())}, exchange_->round_end()});
  }
  Metadata meta{{"world_size", std::to_string(comm_->size())},
                {"rank", std::to_string(comm_->rank())},
                {"group_size", std::to_string(inner_comm_->size())},
                {"groups", std::to_string(outer_comm_->size())},
                {"inner_steps", std::to_string(config_.inner_steps)},
                {"overlap_steps", std::to_string(config_.overlap_steps)},
                {"steps", std::to_string(steps_)},
                {"begun_at", std::to_string(begun_at_)},
                {"rounds", std::to_string(exchange_->rounds())},
                {"in_flight", exchange_->in_flight() ? "1" : "0"},
                {"inner_optimizer", inner_->optimizer().name()},
                {"inner_step_count", std::to_string(inner_->optimizer().step_count())},
                {"outer_step_count", std::to_string(exchange_->outer_optimizer().step_count())}};
  save_safetensors(rank_file(model_path, comm_->rank()), t, meta);
}

void DilocoStrategy::load_optimizer_state(const std::string& model_path) {
  const std::string path = rank_file(model_path, comm_->rank());
  if (!std::filesystem::exists(path)) {
    // Not a DiLoCo checkpoint (a DDP run's, say): its model is everyone's start, theta
    // included, and its optimizer file (if any) the inner optimizer's.
    inner_->load_optimizer_state(model_path);
    return;
  }
  const SafetensorsContents c = load_safetensors(path);
  auto need = [&](const char* key, int64_t want, const std::string& what) {
    const int64_t got = meta_int(c.metadata, key, path);
    if (got != want)
      throw CheckpointError(path, std::string(key) + " " + std::to_string(got) + " differs from this run's " +
                                      std::to_string(want) + " (" + what + "): a DiLoCo checkpoint resumes with the " +
                                      "same world, inner groups, --inner-steps and --outer-overlap-steps");
  };
  need("world_size", comm_->size(), "ranks");
  need("group_size", inner_comm_->size(), "ranks per inner group");
  need("inner_steps", config_.inner_steps, "--inner-steps");
  need("overlap_steps", config_.overlap_steps, "--outer-overlap-steps");
  const auto params = model_.flat_params();
  const NamedTensor& p = tensor(c, "params", params.size(), path);
  std::copy(p.data.begin(), p.data.end(), params.begin());
  if (c.find("buffers")) {
    const auto buffers = model_.flat_buffers();
    const NamedTensor& b = tensor(c, "buffers", buffers.size(), path);
    std::copy(b.data.begin(), b.data.end(), buffers.begin());
  }
  for (auto& [name, span] : inner_->optimizer().state_buffers()) {
    const NamedTensor& s = tensor(c, "inner." + name, span.size(), path);
    std::copy(s.data.begin(), s.data.end(), span.begin());
  }
  inner_->optimizer().set_step_count(meta_int(c.metadata, "inner_step_count", path));
  const NamedTensor& th = tensor(c, "theta", exchange_->theta().size(), path);
  std::copy(th.data.begin(), th.data.end(), exchange_->theta().begin());
  for (auto& [name, span] : exchange_->outer_state()) {
    const NamedTensor& s = tensor(c, "outer." + name, span.size(), path);
    std::copy(s.data.begin(), s.data.end(), span.begin());
  }
  exchange_->outer_optimizer().set_step_count(meta_int(c.metadata, "outer_step_count", path));
  exchange_->set_rounds(meta_int(c.metadata, "rounds", path));
  steps_ = meta_int(c.metadata, "steps", path);
  begun_at_ = meta_int(c.metadata, "begun_at", path);
  if (meta_int(c.metadata, "in_flight", path)) {
    const NamedTensor& avg = tensor(c, "average", exchange_->theta().size(), path);
    const NamedTensor* end = c.find("round_end");
    exchange_->load_in_flight(end ? std::span<const float>(end->data) : std::span<const float>(), avg.data);
  }
  resumed_worker_ = true;
}

}  // namespace dpt
