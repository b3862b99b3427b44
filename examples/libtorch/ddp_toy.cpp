// The PyTorch DDP tutorial's basic demo (ToyModel on random data) as a libtorch program:
//   build/bin/launch -n 2 build/bin/libtorch_ddp_toy        (or mpirun -np 2, srun, torchrun)
// Only the wrapper is dpt's; the model, loss, optimizer and backward are libtorch's own.
#include <dpt/init.h>
#include <dpt/torch/ddp.h>
#include <torch/torch.h>

#include <iostream>

#include "models.h"

int main(int argc, char** argv) {
  dpt::Context ctx = dpt::init(argc, argv);
  ToyModel model;
  dpt::torch::DistributedDataParallel ddp(model, ctx);  // every rank starts from rank 0's weights
  torch::optim::SGD optimizer(model->parameters(), 0.001);

  torch::manual_seed(ctx.rank());  // each rank its own data
  for (int step = 0; step < 5; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(ddp.forward(torch::randn({20, 10})), torch::randn({20, 5}));
    loss.backward();  // returns with the gradients averaged over the ranks
    optimizer.step();
    std::cout << "rank " << ctx.rank() << " step " << step << " loss " << loss.item<float>() << std::endl;
  }
}
