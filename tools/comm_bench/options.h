#pragma once
// comm_bench's command line, spelled as nccl-tests spells it (-b -e -f -n -w -c -d -o)
// (and -z) plus our own long options (--coll --backend --algo --inplace --json), read by
// tools/cli.h (exact names; "-b 8", "-b8" and "--minbytes=8" alike).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/types.h"

namespace dpt::bench {

struct Options {
  size_t min_bytes = 32u << 20;  // nccl-tests' defaults
  size_t max_bytes = 32u << 20;
  size_t factor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  CollKind coll = CollKind::allreduce;
  int root = 0;
  std::string backend;  // empty: COMM_BACKEND or auto
  std::string algo = "auto";
  bool in_place = false;
  // -z 1 (nccl-tests' --blocking): each iteration is a plain blocking call, waited for
  // before the next is issued, so time_us is the latency a caller sees; -z 0 issues all
  // iterations asynchronously and waits at the end (throughput, nccl-tests' default).
  bool blocking = false;
  bool on_device = false;  // --device cuda: buffers on this rank's GPU (LOCAL_RANK)
  std::string json_path;
};

// "8", "64K", "1M", "2G" (powers of 1024, as nccl-tests reads them).
size_t parse_size(const std::string& s);
CollKind parse_coll(const std::string& s);
// Fills `o`; returns the exit status when the program should not run: 0 after --help, 2
// after a bad flag (printed as "comm_bench: <what>" + "(see comm_bench --help)").
std::optional<int> parse_options(int argc, char** argv, Options& o);

}  // namespace dpt::bench
