// Each misuse of the wrappers is an error that names the call (or the rank) on every
// rank, instead of ranks that silently diverge.
#include <memory>
#include <optional>
#include <string>

#include "tests/library/library_test.h"

using namespace dpt;
using Catch::Matchers::Contains;
using dpt::library_test::context;
using dpt::library_test::toy_net;

namespace {
nn::Tensor inputs() { return nn::Tensor::randn({4, 10}, 7 + uint64_t(context().rank())); }
nn::Tensor targets() { return nn::Tensor::randn({4, 5}, 9); }
void train_step(DistributedDataParallel& ddp) { ddp.backward(nn::mse_loss(ddp.forward(inputs()), targets())); }
}  // namespace

TEST_CASE("the wrapper gives every rank rank 0's parameters, whatever each rank built") {
  nn::Model model(toy_net(), {.seed = uint64_t(10 + context().rank())});
  DistributedDataParallel ddp(model, context());
  std::vector<float> p(model.flat_parameters().begin(), model.flat_parameters().end());
  std::vector<float> root = p;
  context().broadcast(root, 0);
  CHECK(p == root);
  nn::Model seed10(toy_net(), {.seed = 10});
  CHECK(std::equal(p.begin(), p.end(), seed10.flat_parameters().begin()));
}

TEST_CASE("models differing across ranks: the constructor names the rank") {
  if (context().world_size() < 2) return;
  nn::Model model(toy_net(context().rank() == 1 ? 6 : 5));
  CHECK_THROWS_WITH(DistributedDataParallel(model, context()),
                    Contains("rank 1 built a different model from rank 0's: rank 0 has 'net2.weight [5, 10]' where rank 1 has "
                             "'net2.weight [6, 10]'"));
}

TEST_CASE("parameters changed on one rank after wrapping (no broadcast): the first step names the rank") {
  if (context().world_size() < 2) return;
  nn::Model model(toy_net());
  DistributedDataParallel ddp(model, context());
  optim::SGD optimizer(ddp.parameters(), {.lr = 0.1f});
  if (context().rank() == 1) model.parameter("net1.weight")[0] += 1.0f;  // e.g. a checkpoint loaded on rank 1 only
  train_step(ddp);
  CHECK_THROWS_WITH(optimizer.step(), Contains("SGD::step()") && Contains("rank(s) 1 differ from rank 0's"));
}

TEST_CASE("a step after a backward inside no_sync is refused: its gradients were never averaged") {
  nn::Model model(toy_net());
  DistributedDataParallel ddp(model, context());
  optim::SGD optimizer(ddp.parameters(), {.lr = 0.1f});
  {
    auto local = ddp.no_sync();
    train_step(ddp);
  }
  CHECK_THROWS_WITH(optimizer.step(), Contains("SGD::step()") && Contains("inside no_sync()"));
  train_step(ddp);  // the averaging backward: now the step is right
  CHECK_NOTHROW(optimizer.step());
}

TEST_CASE("stepping twice is refused") {
  nn::Model model(toy_net());
  DistributedDataParallel ddp(model, context());
  optim::Adam optimizer(ddp.parameters(), {.lr = 0.01f});
  train_step(ddp);
  optimizer.step();
  CHECK_THROWS_WITH(optimizer.step(), Contains("Adam::step()") && Contains("stepping twice"));
}

TEST_CASE("a step before any backward, a backward without forward, two forwards without backward") {
  nn::Model model(toy_net());
  DistributedDataParallel ddp(model, context());
  optim::SGD optimizer(ddp.parameters(), {.lr = 0.1f});
  CHECK_THROWS_WITH(optimizer.step(), Contains("no dpt::DistributedDataParallel::backward() since the last step"));
  const nn::Loss stale = nn::mse_loss(nn::Tensor({4, 5}), targets());
  CHECK_THROWS_WITH(ddp.backward(stale), Contains("DistributedDataParallel::backward: no training forward()"));
  ddp.forward(inputs());
  CHECK_THROWS_WITH(ddp.forward(inputs()), Contains("DistributedDataParallel::forward") && Contains("no backward()"));
  CHECK_THROWS_WITH(ddp.backward(nn::mse_loss(nn::Tensor({3, 5}), nn::Tensor({3, 5}))),
                    Contains("the output gradient has shape [3, 5], the output [4, 5]"));
}

TEST_CASE("the wrapped model's own backward and optimizer are refused") {
  nn::Model model(toy_net());
  DistributedDataParallel ddp(model, context());
  CHECK_THROWS_WITH(model.forward(inputs()), Contains("wrapped by dpt::DistributedDataParallel"));
  const nn::Loss loss = nn::mse_loss(ddp.forward(inputs()), targets());
  CHECK_THROWS_WITH(model.backward(loss), Contains("call its backward()"));
  CHECK_THROWS_WITH(optim::SGD(model.parameters(), {.lr = 0.1f}), Contains("make the optimizer over the wrapper's"));
  ddp.backward(loss);
  optim::SGD first(ddp.parameters(), {.lr = 0.1f});
  CHECK_THROWS_WITH(optim::SGD(ddp.parameters(), {.lr = 0.1f}), Contains("has an optimizer already"));
  CHECK_THROWS_WITH(DistributedDataParallel(model, context()), Contains("wrapped by dpt::DistributedDataParallel already"));
}

TEST_CASE("bad arguments name the call and the value") {
  CHECK_THROWS_WITH(nn::Linear(0, 3), Contains("dpt::nn::Linear: in_features 0"));
  CHECK_THROWS_WITH(nn::Sequential().add("a.b", nn::ReLU()), Contains("layer name 'a.b'"));
  CHECK_THROWS_WITH(nn::Sequential({{"x", nn::ReLU()}, {"x", nn::ReLU()}}), Contains("a second layer named 'x'"));
  const std::vector<int32_t> labels{0, 7};
  CHECK_THROWS_WITH(nn::cross_entropy(nn::Tensor({2, 5}), labels), Contains("label 7 at row 1"));
  CHECK_THROWS_WITH(nn::mse_loss(nn::Tensor({2, 5}), nn::Tensor({2, 4})), Contains("the target [2, 4]"));
  nn::Model model(toy_net());
  CHECK_THROWS_WITH(model.parameter("net3.weight"), Contains("no parameter 'net3.weight'"));
  model.forward(nn::Tensor({4, 10}));  // the first forward fixes the sample shape
  CHECK_THROWS_WITH(model.forward(nn::Tensor({4, 11})), Contains("input sample shape [11] but the model expects [10]"));
  CHECK_THROWS_WITH(ZeroDataParallel(model, context(), {.stage = 4}), Contains("stage 4: valid are 1, 2, 3"));
}
