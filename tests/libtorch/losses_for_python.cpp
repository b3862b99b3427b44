// The libtorch side of the comparison with Python's DistributedDataParallel
// (vs_python_ddp.sh): trains the ToyModel or the MNIST convnet (no dropout) with
// dpt::torch::DistributedDataParallel and SGD, and writes what Python needs to run the
// same training: rank 0's initial parameters and every step's global batch (raw little-
// endian arrays), and each rank's per-step loss.
//   libtorch_losses_for_python --model toy|mnist --steps N --dir DIR [--backend B]
#include <dpt/init.h>
#include <dpt/torch/ddp.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "examples/libtorch/models.h"

namespace {

constexpr int64_t kPerRank = 8;

void append_raw(const std::string& path, const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  std::ofstream(path, std::ios::binary | std::ios::app)
      .write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * c.element_size()));
}

template <class Net, class MakeBatch, class LossFn>
void run(dpt::Context& ctx, Net net, MakeBatch make_batch, LossFn loss_fn, int steps, const std::string& dir) {
  dpt::torch::DistributedDataParallel ddp(net, ctx);
  if (ctx.rank() == 0)
    for (const auto& p : net->parameters()) append_raw(dir + "/init.bin", p.detach());
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  std::ofstream losses(dir + "/cpp.rank" + std::to_string(ctx.rank()) + ".txt");
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = make_batch(step, kPerRank * ctx.world_size());
    if (ctx.rank() == 0) {
      append_raw(dir + "/x.bin", x);
      append_raw(dir + "/y.bin", y);
    }
    opt.zero_grad();
    torch::Tensor loss = loss_fn(ddp.forward(x.narrow(0, ctx.rank() * kPerRank, kPerRank)),
                                 y.narrow(0, ctx.rank() * kPerRank, kPerRank));
    loss.backward();
    opt.step();
    char line[64];
    std::snprintf(line, sizeof line, "%d %.9g\n", step, loss.item<double>());
    losses << line;
  }
}

}  // namespace

int main(int argc, char** argv) {
  dpt::Context ctx = dpt::init(argc, argv);
  std::string model = "toy", dir = ".";
  int steps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--steps")) steps = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  torch::manual_seed(ctx.rank());  // different local weights: the wrapper gives everyone rank 0's
  if (model == "toy") {
    run(ctx, ToyModel(), [](int step, int64_t n) {
      torch::manual_seed(1000 + step);
      torch::Tensor x = torch::randn({n, 10});
      return std::pair{x, torch::randn({n, 5})};
    }, [](const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); }, steps, dir);
  } else if (model == "mnist") {
    run(ctx, MnistNet(0.0), [](int step, int64_t n) {
      torch::manual_seed(2000 + step);
      torch::Tensor x = torch::randn({n, 1, 28, 28});
      return std::pair{x, torch::randint(0, 10, {n})};
    }, [](const torch::Tensor& out, const torch::Tensor& y) { return torch::nll_loss(out, y); }, steps, dir);
  } else {
    std::fprintf(stderr, "--model %s: toy or mnist\n", model.c_str());
    return 2;
  }
}
