// The two networks of the libtorch examples, written as any libtorch user writes them:
// the PyTorch DDP tutorial's ToyModel and the convnet of pytorch/examples' MNIST
// programs (its distributed C++ example included). Shared by the examples and the tests.
#pragma once

#include <torch/torch.h>

struct ToyModelImpl : torch::nn::Module {
  ToyModelImpl()
      : net1(register_module("net1", torch::nn::Linear(10, 10))), net2(register_module("net2", torch::nn::Linear(10, 5))) {}
  torch::Tensor forward(torch::Tensor x) { return net2(torch::relu(net1(x))); }
  torch::nn::Linear net1, net2;
};
TORCH_MODULE(ToyModel);

// 1x28x28 images to 10 log-probabilities. `dropout` 0 makes it deterministic (the tests
// compare ranks with one process, which cannot draw the same masks).
struct MnistNetImpl : torch::nn::Module {
  explicit MnistNetImpl(double dropout = 0.5)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 10, 5)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(10, 20, 5)))),
        conv2_drop(register_module("conv2_drop", torch::nn::Dropout2d(dropout))),
        fc1(register_module("fc1", torch::nn::Linear(320, 50))),
        fc2(register_module("fc2", torch::nn::Linear(50, 10))),
        dropout_(dropout) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop(conv2(x)), 2));
    x = torch::relu(fc1(x.view({-1, 320})));
    x = torch::dropout(x, dropout_, is_training());
    return torch::log_softmax(fc2(x), 1);
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1, fc2;
  double dropout_;
};
TORCH_MODULE(MnistNet);
