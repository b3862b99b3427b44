#pragma once
// Slurm's compressed lists, as srun sets them for every task (launch_env.h reads them).
//
// Terms:
//   tasks per node - SLURM_TASKS_PER_NODE: comma-separated counts, one per node of the
//                    step in node order, where "N(xM)" stands for M nodes of N tasks:
//                    "2(x3),1" is 2,2,2,1 (nodes 0-2 run two tasks, node 3 one).
//   host list      - SLURM_JOB_NODELIST: comma-separated names, where a bracket holds
//                    numbers and ranges of numbers that keep their zero padding:
//                    "node[01-03,07],gpu5" is node01,node02,node03,node07,gpu5. A name
//                    may hold several brackets ("r[1-2]n[1-2]": r1n1,r1n2,r2n1,r2n2).
// Malformed text is std::invalid_argument naming the variable, the text and the
// offending part.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dpt::slurm {

// `var` names the variable in errors.
std::vector<int> expand_tasks_per_node(std::string_view text, const char* var = "SLURM_TASKS_PER_NODE");
std::vector<std::string> expand_host_list(std::string_view text, const char* var = "SLURM_JOB_NODELIST");

// The rendezvous port of a job step when MASTER_PORT is not set (as torchrun recipes and
// PyTorch Lightning derive one from the job id): 10000 + (job % 2500) * 8 + step % 8, in
// 10000-29999, below Linux's ephemeral ports (32768-60999). Two jobs whose ids differ by
// less than 2500 never share one, nor do steps 0-7 of one job running at once; anything
// else that holds the port makes rank 0 fail naming it (set MASTER_PORT then).
inline int port_for_step(uint64_t job_id, uint64_t step_id) {
  return int(10000 + (job_id % 2500) * 8 + step_id % 8);
}

}  // namespace dpt::slurm
