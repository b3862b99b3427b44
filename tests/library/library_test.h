#pragma once
// Tests of the public API (include/dpt) written against it alone, as a user's program is:
// one dpt::Context per process, made by library_test_main.cpp from the command line.
#include <catch2/catch.hpp>

#include <dpt/dpt.h>

namespace dpt::library_test {

Context& context();

// The PyTorch DDP tutorial's ToyModel: Linear(10, 10), ReLU, Linear(10, 5).
inline nn::Sequential toy_net(int64_t out = 5) {
  return nn::Sequential{{"net1", nn::Linear(10, 10)}, {"relu", nn::ReLU()}, {"net2", nn::Linear(10, out)}};
}

}  // namespace dpt::library_test
