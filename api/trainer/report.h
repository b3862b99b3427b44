#pragma once
// What train prints and writes: rank 0's boxed configuration, one line per logged step
// (a progress bar on a terminal), eval and event lines, the `final: key=value ...` line,
// and the JSON lines of --metrics-out.
#include <fstream>
#include <string>

#include "api/trainer/options.h"
#include "train/dist_trainer.h"

namespace train {

// The boxed configuration and the start memory table (call on rank 0).
void print_config(const Options& o, dpt::DistTrainer& trainer, const dpt::Communicator& comm);

// Rank 0 of the current group prints and writes the metrics (in an elastic job the
// process that is rank 0 may change: a new one appends to the same file).
class Reporter {
 public:
  // start_rank: this process's rank in the first group (rank 0 truncates --metrics-out).
  Reporter(const Options& o, dpt::DistTrainer& trainer, int start_rank);
  // The step, eval, event, membership and leave callbacks, with `on_phase` (a test hook).
  dpt::TrainCallbacks callbacks(std::function<void(int64_t, const char*)> on_phase);
  // The end memory table and the final line (on the group's rank 0).
  void final_line(const dpt::TrainSummary& s);

 private:
  bool leader() const;
  void open_metrics();

  const Options& o_;
  dpt::DistTrainer& trainer_;
  int start_rank_;
  bool tty_;
  std::ofstream metrics_;
};

}  // namespace train
