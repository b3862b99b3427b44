#include "comm/launch/launch_env.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "comm/launch/slurm_lists.h"

namespace dpt {

static const char* get(const char* n) {
  const char* v = std::getenv(n);
  return (v && *v) ? v : nullptr;
}

static int parse_int(const char* name, const char* v, int lo, int hi) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi)
    throw std::invalid_argument(std::string("launch variable ") + name + "='" + v +
                                "' is not an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  return static_cast<int>(x);
}

static bool read_pair(LaunchInfo& li, const char* rank_var, const char* size_var) {
  const char* r = get(rank_var);
  const char* s = get(size_var);
  if (!r && !s) return false;
  if (!r || !s)
    throw std::invalid_argument(std::string("launch variables: ") + (r ? size_var : rank_var) +
                                " is missing while " + (r ? rank_var : size_var) + " is set");
  li.world_size = parse_int(size_var, s, 1, 1 << 20);
  li.rank = parse_int(rank_var, r, 0, li.world_size - 1);
  return true;
}

// srun's per-task variables (SLURM_NTASKS_PER_NODE is not one: Slurm sets it only when
// --ntasks-per-node was given). The node's task count is SLURM_TASKS_PER_NODE's entry
// for SLURM_NODEID; MASTER_ADDR defaults to the first host of the job's node list.
static void read_slurm(LaunchInfo& li) {
  if (const char* v = get("SLURM_LOCALID")) li.local_rank = parse_int("SLURM_LOCALID", v, 0, 1 << 20);
  if (const char* v = get("SLURM_TASKS_PER_NODE")) {
    const std::vector<int> per_node = slurm::expand_tasks_per_node(v);
    long long total = 0;
    for (int n : per_node) total += n;
    if (total != li.world_size)
      throw std::invalid_argument(fmt::format("launch variables: SLURM_TASKS_PER_NODE='{}' adds up to {} tasks but "
                                              "SLURM_NTASKS={}", v, total, li.world_size));
    if (const char* id = get("SLURM_NODEID")) {
      li.local_size = per_node[size_t(parse_int("SLURM_NODEID", id, 0, int(per_node.size()) - 1))];
    } else if (std::count(per_node.begin(), per_node.end(), per_node.front()) == long(per_node.size())) {
      li.local_size = per_node.front();  // every node alike: which one does not matter
    }
  }
  if (!get("MASTER_ADDR")) {
    // Rank 0 runs on the step's first node (a step may use part of the job's nodes).
    const char* var = get("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST"
                      : get("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST";
    if (const char* v = get(var)) li.master_addr = slurm::expand_host_list(v, var).front();
  }
  if (!get("MASTER_PORT")) {
    if (const char* job = get("SLURM_JOB_ID")) {
      const char* step = get("SLURM_STEP_ID");
      li.master_port = slurm::port_for_step(
          uint64_t(parse_int("SLURM_JOB_ID", job, 0, 2147483647)),
          step ? uint64_t(std::strtoull(step, nullptr, 10)) : 0);  // "batch"/"extern" steps: 0
    }
  }
}

LaunchInfo detect_launch() {
  LaunchInfo li;
  if (read_pair(li, "RANK", "WORLD_SIZE")) {
    li.source = "torchrun";
    if (const char* v = get("LOCAL_RANK")) li.local_rank = parse_int("LOCAL_RANK", v, 0, 1 << 20);
    if (const char* v = get("LOCAL_WORLD_SIZE")) li.local_size = parse_int("LOCAL_WORLD_SIZE", v, 1, 1 << 20);
    else li.local_size = li.world_size;
  } else if (read_pair(li, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")) {
    li.source = "openmpi";
    if (const char* v = get("OMPI_COMM_WORLD_LOCAL_RANK")) li.local_rank = parse_int("OMPI_COMM_WORLD_LOCAL_RANK", v, 0, 1 << 20);
    if (const char* v = get("OMPI_COMM_WORLD_LOCAL_SIZE")) li.local_size = parse_int("OMPI_COMM_WORLD_LOCAL_SIZE", v, 1, 1 << 20);
  } else if (read_pair(li, "PMI_RANK", "PMI_SIZE")) {
    li.source = "pmi";
    if (const char* v = get("MPI_LOCALRANKID")) li.local_rank = parse_int("MPI_LOCALRANKID", v, 0, 1 << 20);
    if (const char* v = get("MPI_LOCALNRANKS")) li.local_size = parse_int("MPI_LOCALNRANKS", v, 1, 1 << 20);
  } else if (read_pair(li, "SLURM_PROCID", "SLURM_NTASKS")) {
    li.source = "slurm";
    read_slurm(li);
  } else {
    li.source = "single";
  }
  if (li.local_rank >= li.local_size) li.local_size = li.local_rank + 1;
  if (const char* v = get("MASTER_ADDR")) li.master_addr = v;
  if (const char* v = get("MASTER_PORT")) li.master_port = parse_int("MASTER_PORT", v, 1, 65535);
  return li;
}

}  // namespace dpt
