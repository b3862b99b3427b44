#include "comm/launch/topology.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "comm/launch/env.h"

namespace dpt {

Topology::Topology(const std::vector<uint64_t>& digests, int rank) : rank_(rank) {
  if (digests.empty() || rank < 0 || rank >= int(digests.size()))
    throw std::invalid_argument("topology: rank " + std::to_string(rank) + " of " + std::to_string(digests.size()));
  std::map<uint64_t, int> host_index;  // in the order of each host's lowest rank
  host_of_.assign(digests.size(), 0);
  host_ranks_.clear();
  for (size_t r = 0; r < digests.size(); ++r) {
    auto [it, inserted] = host_index.emplace(digests[r], int(host_ranks_.size()));
    if (inserted) host_ranks_.emplace_back();
    host_of_[r] = it->second;
    host_ranks_[size_t(it->second)].push_back(int(r));
  }
  finish();
}

Topology Topology::of_members(const Topology& parent, const std::vector<int>& members, int rank) {
  std::vector<uint64_t> digests;
  for (int m : members) digests.push_back(uint64_t(parent.host_of(m)));
  return Topology(digests, rank);
}

void Topology::finish() {
  const auto& mine = host_ranks_[size_t(host_of_[size_t(rank_)])];
  local_rank_ = int(std::find(mine.begin(), mine.end(), rank_) - mine.begin());
  uniform_ = int(host_ranks_[0].size());
  for (const auto& h : host_ranks_)
    if (int(h.size()) != uniform_) uniform_ = 0;
}

std::vector<int> Topology::host_order() const {
  std::vector<int> order;
  for (const auto& h : host_ranks_) order.insert(order.end(), h.begin(), h.end());
  return order;
}

bool Topology::host_contiguous() const {
  const std::vector<int> order = host_order();
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != int(i)) return false;
  return true;
}

std::string Topology::describe() const {
  if (uniform_) return std::to_string(hosts()) + (hosts() == 1 ? " host x " : " hosts x ") + std::to_string(uniform_) +
                       (uniform_ == 1 ? " rank" : " ranks");
  size_t lo = host_ranks_[0].size(), hi = lo;
  for (const auto& h : host_ranks_) lo = std::min(lo, h.size()), hi = std::max(hi, h.size());
  return std::to_string(hosts()) + " hosts (" + std::to_string(lo) + "-" + std::to_string(hi) + " ranks each)";
}

std::vector<uint64_t> apply_fake_hosts(std::vector<uint64_t> digests) {
  const std::string v = env::get_string("COMM_FAKE_HOSTS");
  if (v.empty()) return digests;
  const auto colon = v.find(':');
  const std::string count = v.substr(0, colon), order = colon == std::string::npos ? "block" : v.substr(colon + 1);
  int hosts = 0;
  try {
    size_t used = 0;
    hosts = std::stoi(count, &used);
    if (used != count.size()) hosts = 0;
  } catch (const std::exception&) {
  }
  const int n = int(digests.size());
  if (hosts < 1 || (order != "block" && order != "cyclic"))
    throw std::invalid_argument("COMM_FAKE_HOSTS='" + v + "': want H, H:block or H:cyclic with H >= 1");
  const int per_host = (n + hosts - 1) / hosts;
  for (int r = 0; r < n; ++r) digests[size_t(r)] = uint64_t(order == "block" ? r / per_host : r % hosts);
  return digests;
}

}  // namespace dpt
