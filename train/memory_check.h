#pragma once
// Refusing a job whose model states will not fit this host, before anything big is
// allocated (issue 17: gpt2-large under DDP at 4 ranks needs ~46 GiB; this VM has 24).
//
// Terms:
//   P, N, K     as in model_state_memory.h: parameters, world size, optimizer-state bytes per
//               parameter (Adam 8, SGD with momentum 4, plain SGD 0; + 4 for the fp32
//               masters under --precision bf16).
//   per rank    the ZeRO formula of the stage (zero_formula_bytes: DDP (8 + K) P,
//               stage 1 8P + KP/N, stage 2 4P + (4 + K)P/N, stage 3 (8 + K)P/N), plus
//               stage 3's gathered working set (two copies of the largest layer: the
//               one computing and the one prefetched), for stages 2 and 3 the largest
//               layer's gradient (resident through the backward when tied, as gpt2's
//               embedding is), plus the activations of one
//               micro-batch (the model's estimate; 0 where it has none); and at least
//               what a rank holds while it is built: the whole model's fp32 parameters
//               (4P; the gradient buffer stays untouched), plus for ZeRO-2/3 the
//               gradient shard and optimizer state ((4 + K)P/N) allocated before the
//               unowned pages are released; ZeRO-3 builds sharded (param_store.h): its
//               shard and the one layer being written (4P/N + 4 x largest layer).
//   per host    per rank x the ranks on this host (the launcher's local size).
//   available   this host's MemAvailable (/proc/meminfo), or less where the cgroup's
//               limit (memory.max, v2; memory.limit_in_bytes, v1) minus its usage is
//               lower. DPT_MEM_AVAILABLE_BYTES replaces it (tests, or a deliberate
//               guess).
//   usable      95% of available: the estimate leaves out each process's own code, libraries
//               and data (tens of MiB) and was measured up to 2% under the real peak
//               (docs/gpt2.md), so a plan within 5% of the limit would end in the OOM killer.
// A job fits when per host <= usable. The check is collective (one allreduce of
// whether each rank fits), so every rank refuses together instead of some allocating
// and then waiting on the others forever.
#include <cstdint>
#include <string>

#include "comm/communicator.h"

namespace dpt {

struct MemoryNeed {
  double params = 0;           // P
  double largest_layer = 0;    // parameters of the largest layer (stage 3's gathers)
  double activation_bytes = 0; // one micro-batch on one rank
  double state_per_param = 0;  // K
  bool sharded_build = false;  // ZeRO-3 builds only the own shard (param_store.h)
};

struct MemoryPlan {
  double per_rank = 0, per_host = 0, available = 0, usable = 0;
  int local_ranks = 1;
  int lowest_fitting_stage = -1;  // -1: no stage fits at this world size
  std::string available_from;     // "MemAvailable", "cgroup memory.max", "DPT_MEM_AVAILABLE_BYTES"
};

inline constexpr double kUsableFraction = 0.95;  // of the available bytes (usable, above)

// K of an optimizer by name and momentum; bf16 adds the fp32 masters.
double optimizer_state_per_param(const std::string& optimizer, float momentum, bool bf16_masters);
double rank_bytes(const MemoryNeed& need, int stage, int world);
// What this host can give, and from where.
double available_bytes(std::string& from);
MemoryPlan plan_memory(const MemoryNeed& need, int stage, int world, int local_ranks);
// The refusal's text: bytes needed per host, available, the lowest stage that fits.
std::string memory_refusal(const MemoryPlan& plan, int stage, int world);
// Collective when `agree`: throws std::runtime_error (memory_refusal) on every rank when
// any rank's host does not fit. Without `agree` (a process joining a running elastic job,
// whose first collective must be the members'), only this rank's host is judged.
void check_memory_fits(Communicator& comm, const MemoryNeed& need, int stage, int local_ranks, bool agree = true);

}  // namespace dpt
