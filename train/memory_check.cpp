#include "train/memory_check.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "parallel/model_state_memory.h"

namespace dpt {

namespace {
// A file's first number (cgroup files; "max" means no limit: -1).
double read_number(const std::string& path) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word == "max") return -1;
  try {
    return std::stod(word);
  } catch (const std::exception&) {
    return -1;
  }
}

std::string gib(double bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%.0f bytes (%.2f GiB)", bytes, bytes / double(1ull << 30));
  return b;
}
}  // namespace

double optimizer_state_per_param(const std::string& optimizer, float momentum, bool bf16_masters) {
  const double k = optimizer == "adam" || optimizer == "adamw" ? 8 : (momentum != 0 ? 4 : 0);
  return k + (bf16_masters ? 4 : 0);
}

double rank_bytes(const MemoryNeed& need, int stage, int world) {
  double b = zero_formula_bytes(stage, need.params, world, need.state_per_param) + need.activation_bytes;
  if (stage == 3) b += 2 * 4 * need.largest_layer;
  // ZeRO-2/3 release gradient pages bucket by bucket, but a tied layer's gradient (gpt2's
  // embedding, also the output head: the largest layer) is written by the first layer of
  // the backward and complete only at its last, so it stays resident throughout.
  if (stage >= 2) b += 4 * need.largest_layer;
  // Construction: a rank writes every parameter of the model it builds (4P; the
  // gradient buffer is not touched, models/kernels/cpu/lazy_floats.h), and ZeRO-2/3 allocate their
  // gradient shard and optimizer state ((4 + K)P/N) before the parameter pages not
  // owned are released; a sharded build (ZeRO-3, param_store.h) holds its shard plus
  // the one layer being written instead. Before both (when every rank also zeroed the
  // whole gradient buffer) gpt2-large under ZeRO-3 reached 10.37 GiB per rank while
  // building at 2 ranks, and the OOM killer ended it at 4 on this 24 GB host.
  const double building = need.sharded_build ? 4 * need.params / world + 4 * need.largest_layer
                                             : 4 * need.params + (stage >= 2 ? (4 + need.state_per_param) * need.params / world : 0);
  return std::max(b, building);
}

double available_bytes(std::string& from) {
  if (const char* env = std::getenv("DPT_MEM_AVAILABLE_BYTES")) {
    from = "DPT_MEM_AVAILABLE_BYTES";
    try {
      return std::stod(env);
    } catch (const std::exception&) {
      throw std::invalid_argument(std::string("DPT_MEM_AVAILABLE_BYTES='") + env + "' is not a number of bytes");
    }
  }
  double avail = -1;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kib = 0;
    meminfo >> kib;
    if (key == "MemAvailable:") avail = kib * 1024;
    meminfo.ignore(256, '\n');
  }
  from = "MemAvailable (/proc/meminfo)";
  // A cgroup limit below what the host has free is the real bound.
  const double v2 = read_number("/sys/fs/cgroup/memory.max"), v2_used = read_number("/sys/fs/cgroup/memory.current");
  const double v1 = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
               v1_used = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  if (v2 > 0 && v2_used >= 0 && (avail < 0 || v2 - v2_used < avail)) {
    avail = v2 - v2_used;
    from = "cgroup memory.max - memory.current";
  } else if (v1 > 0 && v1 < 1e18 && v1_used >= 0 && (avail < 0 || v1 - v1_used < avail)) {
    avail = v1 - v1_used;
    from = "cgroup memory.limit_in_bytes - usage";
  }
  return avail;
}

MemoryPlan plan_memory(const MemoryNeed& need, int stage, int world, int local_ranks) {
  MemoryPlan p;
  p.local_ranks = local_ranks;
  p.per_rank = rank_bytes(need, stage, world);
  p.per_host = p.per_rank * local_ranks;
  p.available = available_bytes(p.available_from);
  p.usable = kUsableFraction * p.available;
  for (int s = 0; s <= 3 && p.lowest_fitting_stage < 0; ++s)
    if (rank_bytes(need, s, world) * local_ranks <= p.usable) p.lowest_fitting_stage = s;
  return p;
}

std::string memory_refusal(const MemoryPlan& p, int stage, int world) {
  const std::string what = stage == 0 ? "DDP" : "ZeRO-" + std::to_string(stage);
  std::string msg = what + " at " + std::to_string(world) + " ranks needs " + gib(p.per_host) + " per host (" +
                    gib(p.per_rank) + " per rank x " + std::to_string(p.local_ranks) +
                    " ranks on this host: the ZeRO formula of the stage plus activations and gathers, or what a rank holds while "
                    "the model is built if more), but " +
                    gib(p.available) + " are available (" + p.available_from + "), of which 95% (" + gib(p.usable) +
                    ") may be planned. ";
  if (p.lowest_fitting_stage > stage)
    msg += "The lowest ZeRO stage that fits is --zero " + std::to_string(p.lowest_fitting_stage) + ".";
  else
    msg += "No ZeRO stage fits with " + std::to_string(p.local_ranks) +
           " ranks on this host: use fewer ranks per host (more hosts), a smaller model or batch.";
  return msg + " (--ignore-memory-check runs anyway.)";
}

void check_memory_fits(Communicator& comm, const MemoryNeed& need, int stage, int local_ranks, bool agree) {
  const MemoryPlan plan = plan_memory(need, stage, comm.size(), local_ranks);
  int32_t fits = plan.per_host <= plan.usable ? 1 : 0;
  if (agree) comm.allreduce(make_buffer(&fits, 1), ReduceOp::min);
  if (!fits) {
    if (plan.per_host <= plan.usable)
      throw std::runtime_error("another rank's host does not have the memory for this job (its message says how much)");
    throw std::runtime_error(memory_refusal(plan, stage, comm.size()));
  }
}

}  // namespace dpt
