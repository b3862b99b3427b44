// PyTorch's DDP tutorial, demo_checkpoint, in C++ (docs/library.md): rank 0 saves the
// model, every rank loads it after a barrier, trains a step, and rank 0 removes the file.
#include <dpt/dpt.h>

#include <cstdio>
#include <filesystem>

using namespace dpt;

int main(int argc, char** argv) {
  Context ctx = init(argc, argv);
  std::printf("Running DDP checkpoint example on rank %d.\n", ctx.rank());

  nn::Model model(nn::Sequential{{"net1", nn::Linear(10, 10)}, {"relu", nn::ReLU()}, {"net2", nn::Linear(10, 5)}});
  DistributedDataParallel ddp_model(model, ctx);

  // The backend in the name: two jobs of this demo on one host (mpi and tcp) at once.
  const auto path = std::filesystem::temp_directory_path() / ("model." + ctx.backend() + ".checkpoint");
  // Every rank holds rank 0's parameters now: one writes, all read.
  if (ctx.rank() == 0) model.save(path.string());
  ctx.barrier();  // no rank loads before rank 0 has saved
  model.load(path.string());

  optim::SGD optimizer(ddp_model.parameters(), {.lr = 0.001f});
  optimizer.zero_grad();
  const nn::Tensor& outputs = ddp_model.forward(nn::Tensor::randn({20, 10}, ctx.rank()));
  ddp_model.backward(nn::mse_loss(outputs, nn::Tensor::randn({20, 5}, 100 + ctx.rank())));
  optimizer.step();

  ctx.barrier();  // every rank has read the file
  if (ctx.rank() == 0) std::filesystem::remove(path);
  std::printf("Finished running DDP checkpoint example on rank %d.\n", ctx.rank());
}
