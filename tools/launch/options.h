#pragma once
// launch's command line. One launcher per host; several hosts form one job with
// --nnodes/--node-rank (the global rank of local slot l on node k is k * L + l, or
// l * H + k with --rank-order cyclic).
//
// Terms:
//   slot     a local process position 0..L-1 (LOCAL_RANK); in an elastic job a slot
//            may be refilled by a restarted process.
//   elastic  --elastic: the launcher of node 0 serves the rendezvous store itself (at
//            MASTER_ADDR:MASTER_PORT), so no rank's death takes the coordination with
//            it; a dead rank does not stop the others, and with --max-restarts its
//            slot gets a new process that joins the running job (DPT_ELASTIC_* below).
//   -n MIN:MAX  elastic limits per node: MAX processes start on each node, and the job
//            goes on while at least nnodes x MIN members are left.
#include <string>
#include <vector>

namespace launch {

struct Options {
  int nproc = 0;         // processes started on this node (MAX with -n MIN:MAX)
  int min_nproc = 0;     // elastic: MIN per node (= nproc without a colon)
  int nnodes = 1;
  int node_rank = 0;
  int master_port = 0;
  std::string master_addr = "127.0.0.1";
  double grace_s = 5.0;
  bool prefix = true;
  bool elastic = false;
  bool cyclic = false;   // --rank-order cyclic: ranks round robin over the nodes
  int max_restarts = 0;  // elastic: replacement processes this launcher may start in all
  std::string bind = "none";  // --bind none | cores (tools/launch/cpu_binding.h)
  std::vector<std::vector<int>> slot_cpus;  // --bind cores: each slot's CPUs
  std::vector<std::string> command;
  bool cleanup_shm = false;  // --cleanup-shm: reclaim dead processes' /dev/shm objects and exit

  int world_max() const { return nnodes * nproc; }
  // The global rank of local slot l (block: k * L + l; cyclic: l * H + k).
  int global_rank(int slot) const { return cyclic ? slot * nnodes + node_rank : node_rank * nproc + slot; }
  int world_min() const { return nnodes * min_nproc; }
};

// Returns false (after printing why, or the help) when the job should not start;
// exit_code is then what launch returns.
bool parse(int argc, char** argv, Options& o, int& exit_code);

}  // namespace launch
