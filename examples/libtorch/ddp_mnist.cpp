// pytorch/examples' distributed MNIST convnet as a libtorch program over dpt, trained on
// MNIST-format files (Fashion-MNIST: gunzip Debian's /usr/share/datasets/fashion-mnist
// into a folder):
//   build/bin/launch -n 2 build/bin/libtorch_ddp_mnist DIR [EPOCHS [BATCHES]]
// (BATCHES: at most this many batches per rank and epoch, for a quick try.)
// Each rank reads its own part of every epoch (a distributed sampler); rank 0 reports the
// test accuracy and saves the model with torch::save.
#include <dpt/init.h>
#include <dpt/torch/ddp.h>
#include <torch/torch.h>

#include <iostream>

#include "models.h"

int main(int argc, char** argv) {
  dpt::Context ctx = dpt::init(argc, argv);
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " MNIST_DIR [EPOCHS [BATCHES]]\n";
    return 2;
  }
  const std::string dir = argv[1];
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 1;
  const int max_batches = argc > 3 ? std::stoi(argv[3]) : -1;
  torch::manual_seed(1);

  MnistNet model;
  dpt::torch::DistributedDataParallel ddp(model, ctx);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.5));

  auto train_set = torch::data::datasets::MNIST(dir).map(torch::data::transforms::Normalize<>(0.2860, 0.3530))
                       .map(torch::data::transforms::Stack<>());
  const size_t train_size = train_set.size().value();
  torch::data::samplers::DistributedRandomSampler sampler(train_size, ctx.world_size(), ctx.rank());
  auto loader = torch::data::make_data_loader(std::move(train_set), sampler, 64);

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    sampler.set_epoch(epoch);
    model->train();
    double loss_sum = 0;
    int batches = 0;
    for (auto& batch : *loader) {
      if (batches == max_batches) break;  // every rank stops at the same count
      optimizer.zero_grad();
      torch::Tensor loss = torch::nll_loss(ddp.forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++batches;
    }
    std::cout << "rank " << ctx.rank() << " epoch " << epoch << " train_loss " << loss_sum / batches << std::endl;
  }

  if (ctx.rank() == 0) {
    auto test_set = torch::data::datasets::MNIST(dir, torch::data::datasets::MNIST::Mode::kTest)
                        .map(torch::data::transforms::Normalize<>(0.2860, 0.3530))
                        .map(torch::data::transforms::Stack<>());
    auto test_loader = torch::data::make_data_loader(std::move(test_set), 1000);
    torch::NoGradGuard no_grad;
    model->eval();
    int64_t correct = 0, total = 0;
    for (const auto& batch : *test_loader) {
      correct += model->forward(batch.data).argmax(1).eq(batch.target).sum().item<int64_t>();
      total += batch.target.size(0);
    }
    std::cout << "test_acc " << double(correct) / double(total) << std::endl;
    torch::save(model, dir + "/mnist_net.pt");
  }
}
