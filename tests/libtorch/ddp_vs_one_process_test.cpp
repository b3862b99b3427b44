// dpt::torch::DistributedDataParallel and ZeroRedundancyOptimizer against one process
// that trains a copy of the same model on the whole global batch: with equal per-rank
// batches the average of the ranks' mean gradients is the global batch's mean
// gradient, so every step's parameters must agree up to float32 rounding.
//
// Tolerance: kTol relative to the parameters' scale. The two sides sum the same products
// in a different order (two half-batch means averaged vs one mean), a few ulps per step;
// 20 steps of SGD stay below 1e-6 here. Dropping the averaging (a sum of N means) or one
// bucket misses by more than 1e-3.
#include <torch/torch.h>

#include <dpt/torch/ddp.h>
#include <dpt/torch/zero.h>

#include <cstdlib>
#include <string>

#include "examples/libtorch/models.h"
#include "tests/library/library_test.h"

using dpt::library_test::context;

namespace {

constexpr double kTol = 2e-5;
constexpr int64_t kPerRank = 4;

struct Batch {
  torch::Tensor x, y;
};

// The global batch of `step`, the same on every rank; rank r trains on rows [rB, (r+1)B).
Batch toy_batch(int step, int64_t n) {
  torch::manual_seed(1000 + step);
  return {torch::randn({n, 10}), torch::randn({n, 5})};
}
Batch mnist_batch(int step, int64_t n) {
  torch::manual_seed(2000 + step);
  return {torch::randn({n, 1, 28, 28}), torch::randint(0, 10, {n})};
}
Batch rows_of_rank(const Batch& b) {
  const int64_t r = context().rank();
  return {b.x.narrow(0, r * kPerRank, kPerRank), b.y.narrow(0, r * kPerRank, kPerRank)};
}

torch::Tensor toy_loss(const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); }
torch::Tensor nll(const torch::Tensor& out, const torch::Tensor& y) { return torch::nll_loss(out, y); }

// Largest |a - b| over the parameters, relative to the largest |b|.
double max_relative_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t k = 0; k < a.size(); ++k) {
    diff = std::max(diff, (a[k] - b[k]).abs().max().item<double>());
    scale = std::max(scale, b[k].abs().max().item<double>());
  }
  return diff / scale;
}

void copy_parameters(const std::vector<torch::Tensor>& from, std::vector<torch::Tensor> to) {
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < from.size(); ++k) to[k].copy_(from[k]);
}

// Trains `net` under DDP and `ref` alone on the global batch for `steps` steps; returns
// the worst relative parameter difference seen after any step.
template <class Net, class MakeBatch, class LossFn>
double train_both(Net net, Net ref, MakeBatch make_batch, LossFn loss_fn, int steps, const dpt::torch::DdpOptions& o,
                  bool set_to_none = true) {
  dpt::torch::DistributedDataParallel ddp(net, context(), o);
  copy_parameters(net->parameters(), ref->parameters());
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD ref_opt(ref->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  double worst = 0;
  const int64_t global = kPerRank * context().world_size();
  for (int step = 0; step < steps; ++step) {
    const Batch all = make_batch(step, global);
    const Batch mine = rows_of_rank(all);
    opt.zero_grad(set_to_none);
    loss_fn(ddp.forward(mine.x), mine.y).backward();
    opt.step();
    ref_opt.zero_grad();
    loss_fn(ref->forward(all.x), all.y).backward();
    ref_opt.step();
    worst = std::max(worst, max_relative_diff(net->parameters(), ref->parameters()));
  }
  return worst;
}

// A model whose second branch is used only when asked (find_unused_parameters).
struct BranchyImpl : torch::nn::Module {
  BranchyImpl() : a(register_module("a", torch::nn::Linear(10, 5))), b(register_module("b", torch::nn::Linear(10, 5))) {}
  torch::Tensor forward(torch::Tensor x, bool use_b) { return use_b ? a(x) + b(x) : a(x); }
  torch::nn::Linear a, b;
};
TORCH_MODULE(Branchy);

}  // namespace

TEST_CASE("ToyModel: N ranks at batch B equal one process at batch N*B over 20 steps") {
  torch::manual_seed(context().rank());  // different local initialisations: the wrapper copies rank 0's
  const double diff = train_both(ToyModel(), ToyModel(), toy_batch, toy_loss, 20, {});
  INFO("max relative parameter difference " << diff);
  CHECK(diff < kTol);
}

TEST_CASE("MNIST convnet: N ranks at batch B equal one process at batch N*B over 20 steps") {
  torch::manual_seed(context().rank());
  const double diff = train_both(MnistNet(0.0), MnistNet(0.0), mnist_batch, nll, 20, {});
  INFO("max relative parameter difference " << diff);
  CHECK(diff < kTol);
}

TEST_CASE("buckets: one per parameter, launched after backward, gives the same result") {
  torch::manual_seed(7);
  dpt::torch::DdpOptions o;
  o.bucket_cap_mb = 1e-6;
  o.first_bucket_mb = 1e-6;
  o.overlap = false;
  const double diff = train_both(MnistNet(0.0), MnistNet(0.0), mnist_batch, nll, 5, o);
  INFO("max relative parameter difference " << diff);
  CHECK(diff < kTol);
}

TEST_CASE("gradient_as_bucket_view: the same training, .grad views into the buckets") {
  dpt::torch::DdpOptions o;
  o.gradient_as_bucket_view = true;
  torch::manual_seed(context().rank());
  // zero_grad() releases the gradients: each backward's become views at their hook.
  CHECK(train_both(ToyModel(), ToyModel(), toy_batch, toy_loss, 20, o) < kTol);
  CHECK(train_both(MnistNet(0.0), MnistNet(0.0), mnist_batch, nll, 20, o) < kTol);
  // zero_grad(false) zeroes them in place: autograd accumulates into the buckets.
  CHECK(train_both(MnistNet(0.0), MnistNet(0.0), mnist_batch, nll, 20, o, false) < kTol);
  o.bucket_cap_mb = o.first_bucket_mb = 1e-6;  // one bucket per parameter, after backward
  o.overlap = false;
  CHECK(train_both(MnistNet(0.0), MnistNet(0.0), mnist_batch, nll, 5, o, false) < kTol);

  // The views: two parameters of one bucket are adjacent in it, and stay there once the
  // buckets were rebuilt in the gradients' arrival order (after the first backward).
  ToyModel net;
  dpt::torch::DistributedDataParallel ddp(net, context(), dpt::torch::DdpOptions{.gradient_as_bucket_view = true});
  torch::optim::SGD opt(net->parameters(), 0.01);
  std::vector<const void*> second;
  for (int step = 0; step < 3; ++step) {
    const Batch mine = rows_of_rank(toy_batch(step, kPerRank * context().world_size()));
    opt.zero_grad(false);
    toy_loss(ddp.forward(mine.x), mine.y).backward();
    opt.step();
    std::vector<const void*> now;
    for (const auto& p : net->parameters()) now.push_back(p.grad().data_ptr());
    if (step == 1) second = now;
    if (step == 2) CHECK(now == second);
  }
  // net2's weight and bias (the last registered, the first to arrive) share the first
  // bucket, one right after the other.
  const auto ps = net->parameters();
  const auto* w = static_cast<const float*>(ps[2].grad().data_ptr());
  const auto* b = static_cast<const float*>(ps[3].grad().data_ptr());
  CHECK((b + ps[3].numel() == w || w + ps[2].numel() == b));
}

namespace {
// Registered in the opposite order of use: the reverse of registration puts the first
// layer's parameters, whose gradients arrive last, in the first bucket.
struct ReversedImpl : torch::nn::Module {
  ReversedImpl()
      : late(register_module("late", torch::nn::Linear(8, 5))), early(register_module("early", torch::nn::Linear(10, 8))) {}
  torch::Tensor forward(torch::Tensor x) { return late(torch::relu(early(x))); }
  torch::nn::Linear late, early;
};
TORCH_MODULE(Reversed);
}  // namespace

TEST_CASE("rebuild_buckets: buckets in the gradients' arrival order from the second step on") {
  dpt::torch::DdpOptions o;
  o.bucket_cap_mb = o.first_bucket_mb = 1e-6;  // one bucket per parameter
  for (const bool rebuild : {true, false}) {
    o.rebuild_buckets = rebuild;
    INFO("rebuild_buckets " << rebuild);
    torch::manual_seed(11);
    Reversed net;
    dpt::torch::DistributedDataParallel ddp(net, context(), o);
    torch::optim::SGD opt(net->parameters(), 0.01);
    for (int step = 0; step < 3; ++step) {
      const Batch mine = rows_of_rank(toy_batch(step, kPerRank * context().world_size()));
      opt.zero_grad();
      toy_loss(ddp.forward(mine.x), mine.y).backward();
      opt.step();
      const dpt::torch::DdpStats st = ddp.last_stats();
      INFO("step " << step << ": " << st.launched_early << " of " << st.buckets << " buckets launched early");
      REQUIRE(st.buckets == 4);
      if (rebuild && step > 0) {
        CHECK(st.rebuilt);
        CHECK(st.launched_early == st.buckets - 1);  // each as its gradient arrives
      } else {
        CHECK_FALSE(st.rebuilt);
        CHECK(st.launched_early <= 1);  // the first bucket waits for the first layer's bias
      }
    }
  }
  // The relaid buckets average the same gradients, with .grad copies and as views.
  o.rebuild_buckets = true;
  torch::manual_seed(context().rank());
  CHECK(train_both(Reversed(), Reversed(), toy_batch, toy_loss, 10, o) < kTol);
  o.gradient_as_bucket_view = true;
  CHECK(train_both(Reversed(), Reversed(), toy_batch, toy_loss, 10, o, false) < kTol);
}

TEST_CASE("no_sync: micro-batches accumulated locally, then one synchronised backward, equal one process") {
  torch::manual_seed(3);
  ToyModel net, ref;
  dpt::torch::DistributedDataParallel ddp(net, context());
  copy_parameters(net->parameters(), ref->parameters());
  const int64_t global = kPerRank * context().world_size();
  for (int micro = 0; micro < 3; ++micro) {
    const Batch all = toy_batch(50 + micro, global), mine = rows_of_rank(all);
    if (micro < 2) {
      auto guard = ddp.no_sync();
      toy_loss(ddp.forward(mine.x), mine.y).backward();
    } else {
      toy_loss(ddp.forward(mine.x), mine.y).backward();
    }
    toy_loss(ref->forward(all.x), all.y).backward();
  }
  std::vector<torch::Tensor> grads, ref_grads;
  for (auto& p : net->parameters()) grads.push_back(p.grad());
  for (auto& p : ref->parameters()) ref_grads.push_back(p.grad());
  const double diff = max_relative_diff(grads, ref_grads);
  INFO("max relative gradient difference " << diff);
  CHECK(diff < kTol);
}

TEST_CASE("unused parameters: an error naming them, or zero with find_unused_parameters") {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({kPerRank, 10});
  SECTION("refused by default, naming the parameter") {
    Branchy net;
    dpt::torch::DistributedDataParallel ddp(net, context());
    try {
      ddp.forward(x, false).sum().backward();
      FAIL("a backward that left b unused was accepted");
    } catch (const std::runtime_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("'b.weight'") && Catch::Contains("find_unused_parameters"));
    }
  }
  SECTION("counted as zero where a rank did not use them; kept undefined where no rank did") {
    Branchy net, ref;
    dpt::torch::DdpOptions o;
    o.find_unused_parameters = true;
    dpt::torch::DistributedDataParallel ddp(net, context(), o);
    copy_parameters(net->parameters(), ref->parameters());
    // Rank 0 uses b, the others do not: b's gradient is rank 0's divided by N.
    const bool use_b = context().rank() == 0;
    ddp.forward(x, use_b).sum().backward();
    const torch::Tensor all = torch::cat(std::vector<torch::Tensor>(size_t(context().world_size()), x));
    // One process: each rank's sum over its rows, averaged over ranks.
    (ref->a(all).sum() / context().world_size() + ref->b(x).sum() / context().world_size()).backward();
    CHECK(max_relative_diff({net->a->weight.grad(), net->b->weight.grad()},
                            {ref->a->weight.grad(), ref->b->weight.grad()}) < kTol);
    net->zero_grad();
    ddp.forward(x, false).sum().backward();
    CHECK_FALSE(net->b->weight.grad().defined());
    CHECK(net->a->weight.grad().defined());
  }
}

TEST_CASE("misuse: a backward whose forward skipped the wrapper is an error naming forward") {
  ToyModel net;
  dpt::torch::DistributedDataParallel ddp(net, context());
  try {
    net->forward(torch::randn({2, 10})).sum().backward();
    FAIL("the module's own forward was accepted");
  } catch (const std::logic_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("DistributedDataParallel::forward"));
  }
  // The wrapper still works after the refusal.
  net->zero_grad();
  ddp.forward(torch::randn({2, 10})).sum().backward();
  CHECK(net->net1->weight.grad().defined());
}

TEST_CASE("misuse: a model that differs between ranks is refused at construction") {
  if (context().world_size() < 2) return;
  torch::nn::Linear net(10, context().rank() == 1 ? 6 : 5);
  CHECK_THROWS_WITH(dpt::torch::DistributedDataParallel(net, context()), Catch::Contains("ranks [1]") && Catch::Contains("same module"));
}

TEST_CASE("ZeRO-1 and ZeRO-2: the parameters of unsharded DDP with Adam; a shard's optimizer state") {
  const int stage = GENERATE(1, 2);
  torch::manual_seed(11);
  MnistNet net(0.0), ref(0.0);
  copy_parameters(net->parameters(), ref->parameters());
  dpt::torch::DistributedDataParallel ddp(net, context());
  dpt::torch::DistributedDataParallel ref_ddp(ref, context());
  auto adam = [](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(1e-3));
  };
  dpt::torch::ZeroRedundancyOptimizer zero(ddp, adam, {.stage = stage});
  torch::optim::Adam full(ref->parameters(), torch::optim::AdamOptions(1e-3));
  const int64_t global = kPerRank * context().world_size();
  for (int step = 0; step < 10; ++step) {
    const Batch mine = rows_of_rank(mnist_batch(300 + step, global));
    zero.zero_grad();
    nll(ddp.forward(mine.x), mine.y).backward();
    if (stage == 2 && context().world_size() > 1)
      for (size_t k = 0; k < net->parameters().size(); ++k)
        CHECK(net->parameters()[k].grad().defined() == (zero.owner_of(k) == context().rank()));
    zero.step();
    full.zero_grad();
    nll(ref_ddp.forward(mine.x), mine.y).backward();
    full.step();
  }
  const double diff = max_relative_diff(net->parameters(), ref->parameters());
  INFO("stage " << stage << ": max relative parameter difference " << diff);
  CHECK(diff < kTol);
  // Adam's two moments of this rank's shard only: about 1/N of the whole.
  int64_t all = 0;
  for (const auto& p : ref->parameters()) all += 2 * p.numel() * 4;
  std::vector<float> bytes{float(zero.state_bytes())};
  context().allreduce(bytes);
  CHECK(int64_t(bytes[0]) == all);
  if (context().world_size() > 1) CHECK(zero.state_bytes() < all);
}

TEST_CASE("backend switch between steps: the same training") {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return;  // needs an MPI launch for the mpi backend
  torch::manual_seed(13);
  ToyModel net, ref;
  dpt::torch::DistributedDataParallel ddp(net, context());
  copy_parameters(net->parameters(), ref->parameters());
  torch::optim::SGD opt(net->parameters(), 0.05), ref_opt(ref->parameters(), 0.05);
  const std::string first = context().backend(), other = first == "tcp" ? "mpi" : "tcp";
  const int64_t global = kPerRank * context().world_size();
  for (int step = 0; step < 6; ++step) {
    if (step == 3) context().switch_backend(other);
    const Batch all = toy_batch(400 + step, global), mine = rows_of_rank(all);
    opt.zero_grad();
    toy_loss(ddp.forward(mine.x), mine.y).backward();
    opt.step();
    ref_opt.zero_grad();
    toy_loss(ref->forward(all.x), all.y).backward();
    ref_opt.step();
  }
  CHECK(context().backend() == other);
  CHECK(max_relative_diff(net->parameters(), ref->parameters()) < kTol);
  context().switch_backend(first);
}
