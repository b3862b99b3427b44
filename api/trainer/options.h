#pragma once
// train's flags: the groups shared with train_local (model, data, optimisation, run
// length: tools/*_flags.h) and train's own (backend and algorithm, ZeRO, buckets,
// precision, checkpoints, elastic, test hooks), and their checks before any rendezvous.
#include <boost/program_options.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/store/store.h"
#include "api/cli/cli.h"
#include "api/cli/data_flags.h"
#include "api/cli/model_flags.h"
#include "train/dist_trainer.h"

namespace train {

// --debug-signal R:S:PHASE[:STOP|KILL|TERM|USR1|FAIL]: a signal to the process that started as rank R
// (signal 0: FAIL, an injected communication failure).
struct SignalHit {
  int64_t rank = 0, step = 0;
  std::string phase;
  int signal = 0;
};

struct Options {
  // dpt::train_main's caller (dpt/trainer.h): the program's name, and its own model's name
  // (empty: --model names a built-in one) and whether it brings its own data.
  std::string program = "train";
  std::string user_model;
  bool user_data = false;
  dpt::DistTrainConfig cfg;
  std::string backend, algo, precision, grad_compress, device, device_buckets, optimizer_device, overlap_comm;
  std::string metrics_out, config_file;
  std::string trace_dir;  // --trace: the timeline (comm/dispatch/timeline.h)
  std::string switch_backend, switch_to;  // STEP:NAME, and NAME once checked
  int64_t switch_at = -1;
  int zero = 0;
  std::string strategy, outer_dtype, diloco_group;  // --strategy diloco (diloco_options.h)
  int inner_steps = 50;
  int threads = 0;             // --threads (0: planned, comm/launch/thread_plan.h)
  std::string threads_text;    // the plan, for the header
  int powersgd_rank = 4;
  int64_t powersgd_start_step = 10;
  double bucket_mb = 25, first_bucket_mb = 1;
  bool no_overlap = false, no_shuffle = false, elastic = false, no_broadcast_buffers = false;
  std::string uneven, debug_signal, inject_inf;
  std::string straggler_action = "log";  // --straggler-action: log | evict (cfg.straggler_evict)
  std::vector<SignalHit> signals;
  dpt::tools::ModelFlags model;
  dpt::tools::DataFlags data;
};

// Sets train's defaults in `o` and adds every flag to the parser.
void add_options(dpt::tools::Cli& cli, Options& o);
// After notify: fills o.cfg and refuses a bad value (std::invalid_argument naming the flag).
void check_options(Options& o, const boost::program_options::variables_map& vm);
// FAIL's wait for the peers (signal_hook): the elastic job's store and the group's size
// now. Without a store (not elastic) the failure comes at once.
struct FailGate {
  dpt::Store* store = nullptr;
  std::function<int()> world_size;
};
// The --debug-signal test hook for the process that started as `rank` (empty: none).
std::function<void(int64_t, const char*)> signal_hook(const std::vector<SignalHit>& hits, int rank, FailGate gate);

}  // namespace train
