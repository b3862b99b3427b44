// Elastic recovery for libtorch training loops: under build/bin/launch --elastic, the
// survivors of a dead (or hung, or cut-off) rank re-form a smaller group and go on from
// the last completed step, as train --elastic does (docs/elastic.md, docs/libtorch.md).
//
//   dpt::Context ctx = dpt::init(argc, argv, {.elastic = true});   // or an --elastic argument
//   ToyModel model;
//   dpt::torch::DistributedDataParallel ddp(model, ctx);
//   torch::optim::SGD optimizer(model->parameters(), 0.01);
//   dpt::torch::ElasticLoop loop(ddp, optimizer);
//   dpt::torch::ElasticSummary s = loop.run(100, [&](const dpt::torch::ElasticStep& at) {
//     auto [x, y] = my_batch(at.step, at.rank, at.world_size);   // this rank's share of step `step`
//     optimizer.zero_grad();
//     torch::mse_loss(ddp.forward(x), y).backward();
//     optimizer.step();
//   });
//
//   $ build/bin/launch --elastic -n 2:3 build/bin/my_program
//
// What run() does:
//   steps      calls the step function for steps completed() .. steps-1, each with the
//              step's index and the rank and world size of the group that runs it.
//   failure    a communication error inside a step (a peer's connection closed, a wait
//              timed out on a hung peer) ends the step on this rank: the communicator
//              is aborted (so the peers' collectives fail at once), the interrupted
//              backward is forgotten, the process arrives in the next generation in the
//              launcher's store (train --elastic's protocol: comm/store/elastic_membership.h)
//              and the context gets that generation's communicator (new rank, smaller world).
//   state      the member that completed the most steps (lowest rank on a tie) gives every
//              member its parameters, buffers and optimizer state (serialised by
//              libtorch's own optimizer save/load, so any torch::optim optimizer works).
//              A step one survivor completed before the failure reached it counted
//              every rank's gradients: the group goes on after it. So no completed step
//              is lost, and the failed step is run again by the new group.
//   on_reform  then the callback, on every member (say, to rebuild a data loader for
//              the new rank and world size), and the steps go on.
//   growing    while the group is smaller than launch's MAX, rank 0 asks the store before
//              each step (at most twice a second) whether processes restarted by
//              launch --max-restarts wait to join, and tells the members (a one-int
//              broadcast; a full group skips it). If so, every member arrives in the next
//              generation with them and the state goes out as after a failure, to the
//              newcomers too; on_reform runs with `joined` set. A restarted process's
//              dpt::init returns once the members took it in, its DDP wrapper skips the
//              broadcast from rank 0 (the members are not in one), and its run() starts by
//              taking the group's state, so it goes on from the members' step.
//   end        a barrier (re-formed like a step if it fails), so that no member returns
//              and exits while another that failed the last step still needs its state.
// What the step function must do, for the re-run step to equal the one that failed:
//   - take its samples from (step, rank, world_size) (or from what on_reform reset), so
//     the new group shares out the failed step's samples again;
//   - zero the gradients before its backward (the failed backward left local ones);
//   - change the model and the optimizer only after its last collective: with the DDP
//     wrapper the collectives are in forward (buffers) and backward, and
//     optimizer.step() is local. A collective of its own after optimizer.step() (an
//     allreduce of the loss for a log) would, failing there, leave an applied update
//     to be applied again: do it before optimizer.step().
// Errors: std::logic_error naming dpt::torch::ElasticLoop when the context is not elastic,
// when a ZeroRedundancyOptimizer shards the state (a shard lives on one rank and is not
// rebuilt here yet), and when run() is called from inside a step. run() throws what the
// re-forming throws (std::runtime_error subclasses): fewer than launch's MIN ranks are
// left, or this process was excluded from the group (it hung while the others went on).
// A restarted process must build the same model and optimizer and call run(): the members
// wait for it in the state's collectives.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/torch/ddp.h"

namespace dpt::torch {

// Where the step function is: the step index (0-based, the same when a failed step is
// run again), and the group running it.
struct ElasticStep {
  int64_t step = 0;
  int rank = 0;
  int world_size = 1;
  int generation = 0;  // 0 at the start, one more at every re-forming
};

// One re-forming, as every member sees it after the state was taken.
struct ElasticReform {
  int generation = 0;
  int rank = 0;
  int world_size = 0;
  std::vector<std::string> lost;    // launch's ids of the members gone (e.g. "n0.l2.i0")
  std::vector<std::string> joined;  // launch's ids of the newcomers taken in (e.g. "n0.l1.i1")
  int64_t next_step = 0;          // the step the group goes on with (= steps completed)
  int64_t lost_steps = 0;         // completed steps given up (0: the most advanced member's state is taken)
  double recovery_s = 0;          // from the failure seen here to the state in place
  std::string reason;             // the error that ended the previous generation here, or
                                  // "newcomers are waiting to join"
};

struct ElasticSummary {
  int64_t steps = 0;       // completed
  int recoveries = 0;      // re-formings after a failure
  int joins = 0;           // re-formings that took newcomers in (and no failure)
  int64_t lost_steps = 0;  // summed over the recoveries
  int world_size = 0;      // at the end
  int generation = 0;
};

class ElasticLoop {
 public:
  template <class M>
  ElasticLoop(DistributedDataParallel<M>& ddp, ::torch::optim::Optimizer& optimizer)
      : ElasticLoop(ddp.reducer(), optimizer) {}
  ~ElasticLoop();
  ElasticLoop(const ElasticLoop&) = delete;
  ElasticLoop& operator=(const ElasticLoop&) = delete;

  void on_reform(std::function<void(const ElasticReform&)> callback);
  ElasticSummary run(int64_t steps, const std::function<void(const ElasticStep&)>& step);
  int64_t completed() const;

 private:
  ElasticLoop(Reducer& reducer, ::torch::optim::Optimizer& optimizer);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpt::torch
