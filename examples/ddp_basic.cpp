// PyTorch's DDP tutorial, demo_basic, in C++ (docs/library.md):
//   mpirun -np 2 build/bin/ddp_basic          build/bin/launch -n 2 build/bin/ddp_basic
#include <dpt/dpt.h>

#include <cstdio>

using namespace dpt;

nn::Model toy_model() {
  return nn::Model(nn::Sequential{{"net1", nn::Linear(10, 10)}, {"relu", nn::ReLU()}, {"net2", nn::Linear(10, 5)}});
}

int main(int argc, char** argv) {
  Context ctx = init(argc, argv);
  std::printf("Running basic DDP example on rank %d.\n", ctx.rank());

  nn::Model model = toy_model();
  DistributedDataParallel ddp_model(model, ctx);
  optim::SGD optimizer(ddp_model.parameters(), {.lr = 0.001f});

  optimizer.zero_grad();
  const nn::Tensor& outputs = ddp_model.forward(nn::Tensor::randn({20, 10}, ctx.rank()));
  nn::Tensor labels = nn::Tensor::randn({20, 5}, 100 + ctx.rank());
  ddp_model.backward(nn::mse_loss(outputs, labels));
  optimizer.step();

  std::printf("Finished running basic DDP example on rank %d.\n", ctx.rank());
}
