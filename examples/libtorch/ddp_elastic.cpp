// The ToyModel of ddp_toy.cpp as an elastic job: started by launch --elastic, it goes on
// on the survivors when a rank dies, from the last completed step, with no step lost.
//   build/bin/launch --elastic -n 2:3 --max-restarts 1 build/bin/libtorch_ddp_elastic
// (the test libtorch.elastic_kill.np3 kills one of three such processes mid-step: the
// other two finish every step and end where one process on the same samples ends; with
// --max-restarts the launcher starts the dead one again and the loop takes it back in:
// libtorch.elastic_grow.np3).
#include <dpt/init.h>
#include <dpt/torch/ddp.h>
#include <dpt/torch/elastic.h>
#include <torch/torch.h>

#include <iostream>

#include "models.h"

int main(int argc, char** argv) try {
  // Generation 0 of the job; a restarted process waits here until the members take it in.
  dpt::Context ctx = dpt::init(argc, argv, {.elastic = true});
  ToyModel model;
  dpt::torch::DistributedDataParallel ddp(model, ctx);
  torch::optim::SGD optimizer(model->parameters(), 0.001);
  dpt::torch::ElasticLoop loop(ddp, optimizer);

  loop.on_reform([](const dpt::torch::ElasticReform& r) {
    if (r.rank == 0) std::cout << "going on with " << r.world_size << " ranks at step " << r.next_step << std::endl;
  });
  const dpt::torch::ElasticSummary s = loop.run(200, [&](const dpt::torch::ElasticStep& at) {
    // This rank's share of step `at.step`: the same samples whoever runs it, so a step run
    // again by a smaller group is the same step.
    torch::manual_seed(uint64_t(1000 * at.step + at.rank));
    torch::Tensor x = torch::randn({20, 10}), y = torch::randn({20, 5});
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(ddp.forward(x), y);
    loss.backward();  // a dead peer fails it here; the loop re-forms the group and runs the step again
    optimizer.step();
    if (at.step % 50 == 0 && at.rank == 0) std::cout << "step " << at.step << " loss " << loss.item<float>() << std::endl;
  });
  if (ctx.rank() == 0)
    std::cout << "done: steps=" << s.steps << " recoveries=" << s.recoveries << " lost_steps=" << s.lost_steps
              << " world_size=" << s.world_size << std::endl;
} catch (const dpt::ElasticJobOver& e) {
  std::cout << e.what() << std::endl;  // restarted after the others finished: nothing to do
  return 0;
}
