// Checkpoint and resume of a libtorch program under dpt::torch's DDP + ZeRO (Adam), at
// another world size (zero_resume.sh): the global batch is fixed (12 samples, split
// evenly), so a run saved at step K on N ranks and resumed on M ranks must end where the
// uninterrupted run does, up to float32 rounding.
//   libtorch_zero_resume --steps S --stage 1|2 --out FILE [--save-at K --dir D] [--resume D]
#include <dpt/init.h>
#include <dpt/torch/ddp.h>
#include <dpt/torch/zero.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "examples/libtorch/models.h"

int main(int argc, char** argv) {
  dpt::Context ctx = dpt::init(argc, argv);
  int steps = 10, save_at = -1, stage = 1;
  std::string out, dir, resume;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--steps") steps = std::stoi(value);
    else if (flag == "--stage") stage = std::stoi(value);
    else if (flag == "--out") out = value;
    else if (flag == "--save-at") save_at = std::stoi(value);
    else if (flag == "--dir") dir = value;
    else if (flag == "--resume") resume = value;
  }
  constexpr int64_t kGlobal = 12;
  if (kGlobal % ctx.world_size() != 0) throw std::invalid_argument("the world size must divide 12");
  const int64_t per_rank = kGlobal / ctx.world_size();

  torch::manual_seed(0);
  MnistNet net(0.0);
  int first = 0;
  if (!resume.empty()) {
    torch::load(net, resume + "/model.pt");  // PyTorch's own format
    std::ifstream(resume + "/step") >> first;
  }
  dpt::torch::DistributedDataParallel ddp(net, ctx);
  dpt::torch::ZeroRedundancyOptimizer opt(ddp, [](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(1e-3));
  }, {.stage = stage});
  if (!resume.empty()) opt.load(resume);

  for (int step = first; step < steps; ++step) {
    torch::manual_seed(5000 + step);
    const torch::Tensor x = torch::randn({kGlobal, 1, 28, 28}), y = torch::randint(0, 10, {kGlobal});
    opt.zero_grad();
    torch::nll_loss(ddp.forward(x.narrow(0, ctx.rank() * per_rank, per_rank)),
                    y.narrow(0, ctx.rank() * per_rank, per_rank)).backward();
    opt.step();
    if (step + 1 == save_at) {
      if (ctx.rank() == 0) {
        std::filesystem::create_directories(dir);
        torch::save(net, dir + "/model.pt");
        std::ofstream(dir + "/step") << step + 1;
      }
      opt.save(dir);
    }
  }
  if (ctx.rank() == 0) {
    std::ofstream f(out, std::ios::binary);
    for (const auto& p : net->parameters()) {
      const torch::Tensor c = p.detach().contiguous();
      f.write(static_cast<const char*>(c.data_ptr()), std::streamsize(c.numel() * 4));
    }
  }
}
