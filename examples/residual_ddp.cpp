// A residual network of your own under DDP (docs/library.md): residual blocks with
// BatchNorm, gradient accumulation with no_sync(), and the backend switched mid-run.
//   mpirun -np 2 build/bin/residual_ddp --switch-to tcp
#include <dpt/dpt.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace dpt;

nn::Sequential block(int64_t width) {
  return {{"fc1", nn::Linear(width, width)}, {"bn", nn::BatchNorm1d(width)}, {"relu", nn::ReLU()},
          {"fc2", nn::Linear(width, width)}};
}

nn::Model residual_net() {
  nn::Sequential net;
  net.add("stem", nn::Linear(16, 32));
  net.add("block1", nn::Residual(block(32)));
  net.add("relu1", nn::ReLU());
  net.add("down", nn::Residual(nn::Sequential{{"fc", nn::Linear(32, 16)}, {"relu", nn::ReLU()}},
                               nn::Sequential{{"proj", nn::Linear(32, 16)}}));
  net.add("head", nn::Linear(16, 4));
  return nn::Model(net, {.seed = 1});
}

// Four classes by the signs of two projections of the features: learnable, not trivial.
void batch(uint64_t seed, nn::Tensor& x, std::vector<int32_t>& labels) {
  x = nn::Tensor::randn({32, 16}, seed);
  labels.resize(32);
  for (size_t i = 0; i < 32; ++i) {
    const float* r = x.data() + i * 16;
    labels[i] = int32_t((r[0] + r[3] > 0) * 2 + (r[5] - r[9] > 0));
  }
}

int main(int argc, char** argv) {
  Context ctx = init(argc, argv);
  std::string switch_to;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--switch-to") == 0) switch_to = argv[i + 1];

  nn::Model model = residual_net();
  DistributedDataParallel ddp(model, ctx);
  optim::SGD optimizer(ddp.parameters(), {.lr = 0.05f, .momentum = 0.9f});
  nn::Tensor x;
  std::vector<int32_t> labels;
  const int steps = 60, accumulate = 2;
  for (int step = 0; step < steps; ++step) {
    if (step == steps / 2 && !switch_to.empty()) {
      ctx.switch_backend(switch_to);
      if (ctx.rank() == 0) std::printf("step %d: switched to %s\n", step, ctx.backend().c_str());
    }
    optimizer.zero_grad();
    float loss_sum = 0;
    for (int micro = 0; micro < accumulate; ++micro) {
      // Every micro-batch but the last accumulates locally (forward and backward inside
      // no_sync); the last one's backward averages the sum over the ranks.
      std::optional<DataParallel::NoSync> local;
      if (micro + 1 < accumulate) local.emplace(ddp.no_sync());
      batch(uint64_t(step * 1000 + micro * 10 + ctx.rank()), x, labels);
      nn::Loss loss = nn::cross_entropy(ddp.forward(x), labels);
      ddp.backward(loss / float(accumulate));  // the gradient of the micro-batches' mean
      loss_sum += loss.item();
    }
    optimizer.step();
    float mean = loss_sum / accumulate;
    ctx.allreduce({&mean, 1}, Reduce::avg);
    if (ctx.rank() == 0 && (step % 10 == 0 || step == steps - 1))
      std::printf("step %d loss %.4f (%s)\n", step, mean, ctx.backend().c_str());
  }
  return 0;
}
