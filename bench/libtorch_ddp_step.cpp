// Step time of a libtorch program made distributed several ways, on one model and batch:
//   dpt        dpt::torch::DistributedDataParallel (buckets launched during backward)
//   dpt-view   the same with gradient_as_bucket_view and zero_grad(false): no gradient copied
//   dpt-zero   dpt with zero_grad(false) (gradients zeroed in place, not released), no views
//   dpt-after  the same buckets, all launched after backward (overlap off)
//   per-param  pytorch/examples' C++ way: after backward, one blocking allreduce per
//              gradient (here on dpt's communicator, as the example does with MPI)
// The model is an MLP deep enough for backward to outlast the first buckets' reduction
// (--layers x --width, ReLU). Prints samples/s per rank and, for dpt, the share of the
// communication hidden behind backward: 1 - exposed / comm (DdpStats).
//   launch -n 2 libtorch_ddp_step --mode dpt|dpt-view|dpt-zero|dpt-after|per-param [--layers 8 --width 1024
//        --batch 32 --steps 30 --warmup 5]
#include <dpt/init.h>
#include <dpt/torch/ddp.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <span>
#include <string>

namespace {

struct DeepMlpImpl : torch::nn::Module {
  DeepMlpImpl(int layers, int width) {
    for (int i = 0; i < layers; ++i) linears.push_back(register_module("fc" + std::to_string(i), torch::nn::Linear(width, width)));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& l : linears) x = torch::relu(l(x));
    return x;
  }
  std::vector<torch::nn::Linear> linears;
};
TORCH_MODULE(DeepMlp);

}  // namespace

int main(int argc, char** argv) {
  dpt::Context ctx = dpt::init(argc, argv);
  std::string mode = "dpt";
  int layers = 8, width = 1024, batch = 32, steps = 30, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--mode") mode = argv[i + 1];
    else if (f == "--layers") layers = std::stoi(argv[i + 1]);
    else if (f == "--width") width = std::stoi(argv[i + 1]);
    else if (f == "--batch") batch = std::stoi(argv[i + 1]);
    else if (f == "--steps") steps = std::stoi(argv[i + 1]);
    else if (f == "--warmup") warmup = std::stoi(argv[i + 1]);
  }
  torch::manual_seed(0);
  DeepMlp net(layers, width);
  dpt::torch::DdpOptions o;
  o.overlap = mode != "dpt-after";
  // dpt-view: .grad as views into the buckets, zeroed in place, so no gradient is copied.
  o.gradient_as_bucket_view = mode == "dpt-view";
  std::optional<dpt::torch::DistributedDataParallel<DeepMlpImpl>> ddp;
  if (mode != "per-param") ddp.emplace(net, ctx, o);
  torch::optim::SGD opt(net->parameters(), 1e-4);
  const torch::Tensor x = torch::randn({batch, width}), y = torch::randn({batch, width});
  double comm_ms = 0, exposed_ms = 0, seconds = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    ctx.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad(/*set_to_none=*/mode != "dpt-view" && mode != "dpt-zero");
    const torch::Tensor out = ddp ? ddp->forward(x) : net->forward(x);
    torch::mse_loss(out, y).backward();
    if (!ddp)
      for (auto& p : net->parameters()) {
        std::span<float> g(p.grad().data_ptr<float>(), size_t(p.grad().numel()));
        ctx.allreduce(g);
        p.grad().div_(ctx.world_size());
      }
    opt.step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step < warmup) continue;
    seconds += s;
    if (ddp) {
      comm_ms += ddp->last_stats().comm_ms;
      exposed_ms += ddp->last_stats().exposed_ms;
    }
  }
  if (ctx.rank() == 0) {
    std::printf("mode=%s backend=%s ranks=%d layers=%d width=%d batch=%d step_ms=%.2f samples_per_s=%.1f",
                mode.c_str(), ctx.backend().c_str(), ctx.world_size(), layers, width, batch, 1e3 * seconds / steps,
                batch * ctx.world_size() * steps / seconds);
    if (ddp)
      std::printf(" comm_ms=%.2f exposed_ms=%.2f hidden=%.2f", comm_ms / steps, exposed_ms / steps,
                  comm_ms > 0 ? 1 - exposed_ms / comm_ms : 0.0);
    std::printf("\n");
  }
}
