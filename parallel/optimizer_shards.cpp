#include "parallel/optimizer_shards.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "models/io/checkpoint.h"

namespace dpt {
namespace fs = std::filesystem;

namespace {

struct Source {
  std::string path;
  size_t offset = 0, numel = 0;
  SafetensorsContents st;
};

size_t meta_size(const SafetensorsContents& st, const std::string& path, const std::string& key) {
  auto it = st.metadata.find(key);
  if (it == st.metadata.end()) throw CheckpointError(path, "metadata '" + key + "' is missing");
  return size_t(std::stoull(it->second));
}

// The full file if there is one, else all shard files (checked complete and disjoint).
std::vector<Source> read_sources(const std::string& model_path) {
  std::vector<Source> out;
  const std::string full = sidecar_path(model_path, "optim");
  if (fs::exists(full)) {
    Source s{full, 0, 0, load_safetensors(full)};
    if (!s.st.tensors.empty()) s.numel = s.st.tensors.front().data.size();
    out.push_back(std::move(s));
    return out;
  }
  const std::string first = optim_shard_path(model_path, 0);
  if (!fs::exists(first)) throw CheckpointError(full, "no optimizer state: neither this file nor " + first + " exists");
  Source s0{first, 0, 0, load_safetensors(first)};
  const int world = int(meta_size(s0.st, first, "world_size"));
  for (int r = 0; r < world; ++r) {
    Source s = r == 0 ? std::move(s0) : Source{optim_shard_path(model_path, r), 0, 0, {}};
    if (r > 0) {
      if (!fs::exists(s.path)) throw CheckpointError(s.path, "missing: the checkpoint was written by " + std::to_string(world) + " ranks");
      s.st = load_safetensors(s.path);
    }
    s.offset = meta_size(s.st, s.path, "shard_offset");
    s.numel = meta_size(s.st, s.path, "shard_numel");
    for (const auto& t : s.st.tensors)
      if (t.data.size() != s.numel) throw CheckpointError(s.path, "tensor '" + t.name + "' does not hold shard_numel elements");
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string optim_shard_path(const std::string& model_path, int rank) {
  return sidecar_path(model_path, "optim.shard_" + std::to_string(rank));
}

void save_optimizer_shard(const std::string& model_path, Optimizer& optimizer, const ShardLayout& layout, int rank) {
  const size_t real = layout.real_numel(rank);
  std::vector<NamedTensorView> views;
  for (auto& [name, span] : optimizer.state_buffers()) views.push_back({name, {int64_t(real)}, span.subspan(0, real)});
  save_safetensors(optim_shard_path(model_path, rank), views,
                   {{"optimizer", optimizer.name()},
                    {"step_count", std::to_string(optimizer.step_count())},
                    {"shard_offset", std::to_string(std::min(layout.begin(rank), layout.numel))},
                    {"shard_numel", std::to_string(real)},
                    {"world_size", std::to_string(layout.world)},
                    {"total_numel", std::to_string(layout.numel)}});
}

void load_optimizer_range(const std::string& model_path, Optimizer& optimizer, size_t offset, size_t count) {
  auto sources = read_sources(model_path);
  const size_t lo = offset, hi = offset + count;
  for (auto& [name, span] : optimizer.state_buffers()) {
    if (span.size() < count) throw std::logic_error("load_optimizer_range: buffer smaller than the range");
    size_t covered = 0;
    for (const auto& s : sources) {
      const NamedTensor* t = s.st.find(name);
      if (!t) throw CheckpointError(s.path, "missing optimizer state '" + name + "'");
      const size_t b = std::max(lo, s.offset), e = std::min(hi, s.offset + s.numel);
      if (b >= e) continue;
      std::copy(t->data.begin() + ptrdiff_t(b - s.offset), t->data.begin() + ptrdiff_t(e - s.offset),
                span.begin() + ptrdiff_t(b - lo));
      covered += e - b;
    }
    if (covered != count)
      throw CheckpointError(sources.front().path, "optimizer state '" + name + "' covers " + std::to_string(covered) +
                                                      " of the " + std::to_string(count) + " elements asked for");
  }
  for (const auto& s : sources) {
    auto it = s.st.metadata.find("optimizer");
    if (it == s.st.metadata.end() || it->second != optimizer.name())
      throw CheckpointError(s.path, "holds state of optimizer '" + (it == s.st.metadata.end() ? "?" : it->second) +
                                        "', this run uses '" + optimizer.name() + "'");
  }
  optimizer.set_step_count(int64_t(meta_size(sources.front().st, sources.front().path, "step_count")));
}

std::string consolidate_optimizer_state(const std::string& model_path) {
  auto sources = read_sources(model_path);
  const std::string full = sidecar_path(model_path, "optim");
  if (sources.size() == 1 && sources.front().path == full) return full;  // already one file
  const size_t total = meta_size(sources.front().st, sources.front().path, "total_numel");
  std::map<std::string, std::vector<float>> bufs;
  std::vector<std::string> order;
  for (const auto& t : sources.front().st.tensors) order.push_back(t.name), bufs[t.name].assign(total, 0.0f);
  size_t covered = 0;
  for (const auto& s : sources) {
    if (s.offset + s.numel > total) throw CheckpointError(s.path, "shard reaches past total_numel");
    covered += s.numel;
    for (const auto& name : order) {
      const NamedTensor* t = s.st.find(name);
      if (!t) throw CheckpointError(s.path, "missing optimizer state '" + name + "'");
      std::copy(t->data.begin(), t->data.end(), bufs[name].begin() + ptrdiff_t(s.offset));
    }
  }
  if (covered != total) throw CheckpointError(model_path, "the shard files cover " + std::to_string(covered) + " of " + std::to_string(total) + " elements");
  std::vector<NamedTensorView> views;
  for (const auto& name : order) views.push_back({name, {int64_t(total)}, bufs[name]});
  const auto& m = sources.front().st.metadata;
  save_safetensors(full, views, {{"optimizer", m.at("optimizer")}, {"step_count", m.at("step_count")},
                                 {"consolidated_from_world_size", m.at("world_size")}});
  return full;
}

}  // namespace dpt
