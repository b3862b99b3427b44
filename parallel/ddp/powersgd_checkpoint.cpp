#include "parallel/ddp/powersgd_checkpoint.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "models/io/checkpoint.h"

namespace dpt {
namespace {
std::string rank_file(const std::string& model_path, int r) {
  return sidecar_path(model_path, "powersgd.rank_" + std::to_string(r));
}
std::string q_name(size_t i) { return "bucket_" + std::to_string(i) + ".q"; }
std::string error_name(size_t i) { return "bucket_" + std::to_string(i) + ".error"; }
std::string layout_key(size_t i) { return "bucket_" + std::to_string(i) + ".layout"; }

// Copies the named tensor into dst; false when its size differs (another layout).
bool take(const SafetensorsContents& c, const std::string& name, std::span<float> dst, const std::string& path) {
  const NamedTensor* t = c.find(name);
  if (!t) throw CheckpointError(path, "tensor '" + name + "' is missing (the file is incomplete)");
  if (t->data.size() != dst.size()) return false;
  std::copy(t->data.begin(), t->data.end(), dst.begin());
  return true;
}
}  // namespace

void save_powersgd_state(const std::string& model_path, const PowerSgdBuckets& buckets, int rank, int world) {
  if (buckets.empty()) return;
  std::vector<NamedTensorView> state;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const auto q = buckets[i]->q_state(), e = buckets[i]->error_state();
    state.push_back({q_name(i), {int64_t(q.size())}, q});
    state.push_back({error_name(i), {int64_t(e.size())}, e});
  }
  Metadata meta = {{"powersgd_rank", std::to_string(buckets.front()->approximation_rank())},
                   {"buckets", std::to_string(buckets.size())},
                   {"rank", std::to_string(rank)},
                   {"world_size", std::to_string(world)}};
  for (size_t i = 0; i < buckets.size(); ++i) meta[layout_key(i)] = buckets[i]->layout();
  save_safetensors(rank_file(model_path, rank), state, meta);
}

std::string load_powersgd_state(const std::string& model_path, PowerSgdBuckets& buckets, int rank, int world) {
  if (buckets.empty()) return "";
  const std::string first = rank_file(model_path, 0);
  const std::string fresh = ": PowerSGD starts afresh (zero error, the seeded Q)";
  if (!std::filesystem::exists(first))
    return "resume: " + model_path + " holds no PowerSGD state (an uncompressed run, or written before it was saved)" + fresh;
  const SafetensorsContents head = load_safetensors(first);
  const auto meta = [&](const char* key) {
    auto it = head.metadata.find(key);
    if (it == head.metadata.end()) throw CheckpointError(first, std::string("metadata '") + key + "' is missing");
    return it->second;
  };
  const std::string saved_rank = meta("powersgd_rank"), saved_buckets = meta("buckets");
  const std::string world_text = meta("world_size");
  const int saved_world = std::atoi(world_text.c_str());
  if (saved_world < 1 || std::to_string(saved_world) != world_text)
    throw CheckpointError(first, "metadata 'world_size' is '" + world_text + "', not a positive integer");
  if (saved_rank != std::to_string(buckets.front()->approximation_rank()) || saved_buckets != std::to_string(buckets.size())) {
    for (auto& b : buckets) b->reset();
    return "resume: the checkpoint's PowerSGD state is for rank " + saved_rank + " in " + saved_buckets +
           " buckets, this run has rank " + std::to_string(buckets.front()->approximation_rank()) + " in " +
           std::to_string(buckets.size()) + fresh;
  }
  // The matrices each bucket's state belongs to (written since the layout was saved;
  // an older file is checked by sizes alone, below).
  for (size_t i = 0; i < buckets.size(); ++i) {
    auto it = head.metadata.find(layout_key(i));
    if (it != head.metadata.end() && it->second != buckets[i]->layout()) {
      for (auto& b : buckets) b->reset();
      return "resume: the checkpoint's PowerSGD bucket " + std::to_string(i) + " holds other matrices (" + it->second +
             ") than this run's (" + buckets[i]->layout() + "; another --bucket-mb or model?)" + fresh;
    }
  }
  const bool same_world = saved_world == world;
  const std::string mine_path = same_world ? rank_file(model_path, rank) : first;
  const SafetensorsContents mine = same_world && rank != 0 ? load_safetensors(mine_path) : head;
  bool fits = true;
  for (size_t i = 0; i < buckets.size() && fits; ++i) {
    fits = take(mine, q_name(i), buckets[i]->q_state(), mine_path);
    if (same_world && fits) fits = take(mine, error_name(i), buckets[i]->error_state(), mine_path);
    else std::fill(buckets[i]->error_state().begin(), buckets[i]->error_state().end(), 0.0f);
  }
  if (!fits) {
    for (auto& b : buckets) b->reset();
    return "resume: the checkpoint's PowerSGD buckets have other sizes than this run's (another --bucket-mb?)" + fresh;
  }
  if (!same_world)
    return "resume: the checkpoint's PowerSGD state was written by " + std::to_string(saved_world) + " ranks, this run has " +
           std::to_string(world) + ": Q continues, the error feedback restarts from zero";
  return "";
}

}  // namespace dpt
