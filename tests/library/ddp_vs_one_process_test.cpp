// The wrappers against one process: R ranks training on their own batches end with the
// parameters of one process training on the R batches together (the mean loss over the
// global batch), within fp32 rounding, and bit-identical across the ranks.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/library/library_test.h"

using namespace dpt;
using dpt::library_test::context;

namespace {

// y = a * tanh(b * x) per feature: a custom layer inside the tested models.
class ScaledTanh : public nn::CustomLayer {
 public:
  explicit ScaledTanh(int64_t f) : f_(f) {}
  std::vector<nn::ParameterSpec> parameters() const override { return {{"a", {f_}}, {"b", {f_}}}; }
  void reset_parameters(const std::vector<std::span<float>>& p, uint64_t) override {
    for (size_t i = 0; i < p[0].size(); ++i) p[0][i] = 1.0f + 0.1f * float(i), p[1][i] = 0.5f;
  }
  nn::Tensor forward(const nn::Tensor& x, const std::vector<std::span<const float>>& p) override {
    nn::Tensor y(x.shape());
    for (size_t i = 0; i < x.numel(); ++i) y[i] = p[0][i % size_t(f_)] * std::tanh(p[1][i % size_t(f_)] * x[i]);
    return y;
  }
  nn::Tensor backward(const nn::Tensor& x, const nn::Tensor&, const nn::Tensor& dy,
                      const std::vector<std::span<const float>>& p, const std::vector<std::span<float>>& g) override {
    nn::Tensor dx(x.shape());
    for (size_t i = 0; i < x.numel(); ++i) {
      const size_t f = i % size_t(f_);
      const float t = std::tanh(p[1][f] * x[i]), dt = 1 - t * t;
      g[0][f] += t * dy[i];
      g[1][f] += p[0][f] * x[i] * dt * dy[i];
      dx[i] = p[0][f] * p[1][f] * dt * dy[i];
    }
    return dx;
  }

 private:
  int64_t f_;
};

// Residual blocks (one with a projection shortcut) and the custom layer; no BatchNorm,
// whose per-replica statistics make DDP differ from one process by design.
nn::Sequential residual_net() {
  nn::Sequential net;
  net.add("stem", nn::Linear(10, 12));
  net.add("block", nn::Residual(nn::Sequential{{"fc1", nn::Linear(12, 12)}, {"relu", nn::ReLU()},
                                               {"fc2", nn::Linear(12, 12)}}));
  net.add("act", nn::Custom(std::make_shared<ScaledTanh>(12)));
  net.add("down", nn::Residual(nn::Sequential{{"fc", nn::Linear(12, 6)}}, nn::Sequential{{"proj", nn::Linear(12, 6)}}));
  net.add("head", nn::Linear(6, 5));
  return net;
}

constexpr int64_t kBatch = 8;  // per rank
constexpr int kSteps = 5;

// Rank r's batch of step s: rows [r * kBatch, (r + 1) * kBatch) of the step's global batch.
nn::Tensor global_inputs(int step, int world) { return nn::Tensor::randn({kBatch * world, 10}, 1000 + step); }
nn::Tensor global_targets(int step, int world) { return nn::Tensor::randn({kBatch * world, 5}, 2000 + step); }

enum class Kind { ddp, zero1, zero2 };

std::unique_ptr<DataParallel> wrap(Kind kind, nn::Model& model) {
  switch (kind) {
    case Kind::ddp: return std::make_unique<DistributedDataParallel>(model, context(), DdpOptions{.first_bucket_mb = 0.0005});
    case Kind::zero1: return std::make_unique<ZeroDataParallel>(model, context(), ZeroOptions{.stage = 1});
    case Kind::zero2: return std::make_unique<ZeroDataParallel>(model, context(), ZeroOptions{.stage = 2});
  }
  return nullptr;
}

void check_against_one_process(const nn::Sequential& net, Kind kind) {
  Context& ctx = context();
  const int world = ctx.world_size();
  // Every rank its own seed: the wrapper must hand rank 0's parameters to everyone.
  nn::Model model(net, {.seed = uint64_t(ctx.rank() + 1)});
  nn::Model reference(net, {.seed = 1});  // rank 0's initial parameters
  auto dp = wrap(kind, model);
  optim::SGD optimizer(dp->parameters(), {.lr = 0.05f, .momentum = 0.9f});
  optim::SGD ref_optimizer(reference.parameters(), {.lr = 0.05f, .momentum = 0.9f});
  for (int step = 0; step < kSteps; ++step) {
    const nn::Tensor x = global_inputs(step, world), y = global_targets(step, world);
    optimizer.zero_grad();
    dp->backward(nn::mse_loss(dp->forward(x.rows(kBatch * ctx.rank(), kBatch * (ctx.rank() + 1))),
                              y.rows(kBatch * ctx.rank(), kBatch * (ctx.rank() + 1))));
    optimizer.step();
    ref_optimizer.zero_grad();
    reference.backward(nn::mse_loss(reference.forward(x), y));
    ref_optimizer.step();
  }
  const std::span<float> mine = model.flat_parameters();
  const std::span<float> want = reference.flat_parameters();
  REQUIRE(mine.size() == want.size());
  // Bit-identical across the ranks: the max and the min over ranks agree everywhere.
  std::vector<float> hi(mine.begin(), mine.end()), lo(mine.begin(), mine.end());
  ctx.allreduce(hi, Reduce::max);
  ctx.allreduce(lo, Reduce::min);
  size_t differ = 0, off = 0;
  double worst = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    differ += hi[i] != lo[i];
    // fp32 rounding of 5 steps of sums in another order: far below a changed update.
    const double err = std::fabs(double(mine[i]) - double(want[i]));
    worst = std::max(worst, err);
    off += err > 1e-5 * (1.0 + std::fabs(double(want[i])));
  }
  INFO("rank " << ctx.rank() << ": largest difference from one process " << worst);
  CHECK(differ == 0);
  CHECK(off == 0);
  // And training moved them (a test of nothing would pass the two checks above).
  nn::Model initial(net, {.seed = 1});
  double moved = 0;
  for (size_t i = 0; i < mine.size(); ++i) moved = std::max(moved, std::fabs(double(mine[i] - initial.flat_parameters()[i])));
  CHECK(moved > 1e-3);
}

}  // namespace

TEST_CASE("DDP over the tutorial's ToyModel equals one process over the global batch") {
  check_against_one_process(library_test::toy_net(), Kind::ddp);
}

TEST_CASE("DDP over residual blocks and a custom layer equals one process over the global batch") {
  check_against_one_process(residual_net(), Kind::ddp);
}

TEST_CASE("ZeRO-1 and ZeRO-2 wrappers equal one process over the global batch") {
  check_against_one_process(residual_net(), Kind::zero1);
  check_against_one_process(residual_net(), Kind::zero2);
}

TEST_CASE("no_sync accumulates locally and the next backward averages the sum") {
  Context& ctx = context();
  const int world = ctx.world_size();
  nn::Model model(library_test::toy_net(), {.seed = 3});
  nn::Model reference(library_test::toy_net(), {.seed = 3});
  DistributedDataParallel ddp(model, ctx);
  optim::SGD optimizer(ddp.parameters(), {.lr = 0.1f});
  optim::SGD ref_optimizer(reference.parameters(), {.lr = 0.1f});
  optimizer.zero_grad();
  ref_optimizer.zero_grad();
  for (int micro = 0; micro < 3; ++micro) {
    const nn::Tensor x = global_inputs(micro, world), y = global_targets(micro, world);
    {
      std::optional<DataParallel::NoSync> local;
      if (micro < 2) local.emplace(ddp.no_sync());
      ddp.backward(nn::mse_loss(ddp.forward(x.rows(kBatch * ctx.rank(), kBatch * (ctx.rank() + 1))),
                                y.rows(kBatch * ctx.rank(), kBatch * (ctx.rank() + 1))) / 3.0f);
    }
    reference.backward(nn::mse_loss(reference.forward(x), y) / 3.0f);
  }
  optimizer.step();
  ref_optimizer.step();
  double worst = 0;
  for (size_t i = 0; i < model.flat_parameters().size(); ++i)
    worst = std::max(worst, std::fabs(double(model.flat_parameters()[i]) - double(reference.flat_parameters()[i])));
  INFO("largest difference " << worst);
  CHECK(worst < 1e-5);
}

TEST_CASE("DDP over a model of two inputs equals one process over the global batch") {
  Context& ctx = context();
  const int world = ctx.world_size();
  nn::Sequential net;
  net.add("in", nn::Inputs({{"a", {6}, nn::Sequential{{"fc", nn::Linear(6, 5)}, {"relu", nn::ReLU()}}},
                            {"b", {4}, nn::Sequential{{"fc", nn::Linear(4, 3)}}}}));
  net.add("head", nn::Linear(8, 5));
  nn::Model model(net, {.seed = uint64_t(ctx.rank() + 1)});
  nn::Model reference(net, {.seed = 1});
  DistributedDataParallel ddp(model, ctx);
  optim::SGD optimizer(ddp.parameters(), {.lr = 0.05f, .momentum = 0.9f});
  optim::SGD ref_optimizer(reference.parameters(), {.lr = 0.05f, .momentum = 0.9f});
  for (int step = 0; step < kSteps; ++step) {
    const nn::Tensor a = nn::Tensor::randn({kBatch * world, 6}, 300 + step), b = nn::Tensor::randn({kBatch * world, 4}, 400 + step);
    const nn::Tensor y = global_targets(step, world);
    const int64_t lo = kBatch * ctx.rank(), hi = kBatch * (ctx.rank() + 1);
    optimizer.zero_grad();
    ddp.backward(nn::mse_loss(ddp.forward({a.rows(lo, hi), b.rows(lo, hi)}), y.rows(lo, hi)));
    optimizer.step();
    ref_optimizer.zero_grad();
    reference.backward(nn::mse_loss(reference.forward({a, b}), y));
    ref_optimizer.step();
  }
  double worst = 0;
  for (size_t i = 0; i < model.flat_parameters().size(); ++i)
    worst = std::max(worst, std::fabs(double(model.flat_parameters()[i]) - double(reference.flat_parameters()[i])) /
                                (1.0 + std::fabs(double(reference.flat_parameters()[i]))));
  INFO("largest relative difference " << worst);
  CHECK(worst < 1e-5);
}

TEST_CASE("DiLoCo wrapper: H local steps per worker, then the outer Nesterov step, against every worker simulated here") {
  Context& ctx = context();
  const int world = ctx.world_size();
  constexpr int kInner = 3, kRounds = 2;
  constexpr float kInnerLr = 0.05f, kOuterLr = 0.7f, kOuterMomentum = 0.9f;
  nn::Model model(library_test::toy_net(), {.seed = uint64_t(ctx.rank() + 1)});
  DiLoCo diloco(model, ctx, {.inner_steps = kInner, .outer_lr = kOuterLr, .outer_momentum = kOuterMomentum,
                             .group_size = 1});  // every rank a worker of its own
  optim::SGD optimizer(diloco.parameters(), {.lr = kInnerLr});
  // The reference: one model per worker here, each on that worker's rows; at a round's
  // end the pseudo-gradient (start - the workers' mean) takes torch.optim.SGD's Nesterov
  // step from the round's start (buf = mu buf + g, update = g + mu buf).
  std::vector<nn::Model> workers;
  std::vector<std::unique_ptr<optim::SGD>> inner;
  for (int w = 0; w < world; ++w) {
    workers.emplace_back(library_test::toy_net(), nn::ModelOptions{.seed = 1});
    inner.push_back(std::make_unique<optim::SGD>(workers.back().parameters(), optim::SGDOptions{.lr = kInnerLr}));
  }
  const size_t n = workers[0].flat_parameters().size();
  std::vector<double> start(workers[0].flat_parameters().begin(), workers[0].flat_parameters().end()), buf(n, 0.0);
  for (int step = 0; step < kInner * kRounds; ++step) {
    const nn::Tensor x = global_inputs(step, world), y = global_targets(step, world);
    const int64_t lo = kBatch * ctx.rank(), hi = kBatch * (ctx.rank() + 1);
    optimizer.zero_grad();
    diloco.backward(nn::mse_loss(diloco.forward(x.rows(lo, hi)), y.rows(lo, hi)));
    optimizer.step();
    for (int w = 0; w < world; ++w) {
      inner[size_t(w)]->zero_grad();
      workers[size_t(w)].backward(nn::mse_loss(workers[size_t(w)].forward(x.rows(kBatch * w, kBatch * (w + 1))),
                                               y.rows(kBatch * w, kBatch * (w + 1))));
      inner[size_t(w)]->step();
    }
    if ((step + 1) % kInner == 0) {
      for (size_t i = 0; i < n; ++i) {
        double mean = 0;
        for (auto& m : workers) mean += double(m.flat_parameters()[i]);
        const double g = start[i] - mean / world;
        buf[i] = step + 1 == kInner ? g : kOuterMomentum * buf[i] + g;
        start[i] -= kOuterLr * (g + kOuterMomentum * buf[i]);
      }
      for (auto& m : workers)
        for (size_t i = 0; i < n; ++i) m.flat_parameters()[i] = float(start[i]);
    }
  }
  const std::span<float> mine = model.flat_parameters();
  double worst = 0, moved = 0;
  nn::Model initial(library_test::toy_net(), {.seed = 1});
  for (size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(double(mine[i]) - start[i]) / (1.0 + std::fabs(start[i])));
    moved = std::max(moved, std::fabs(start[i] - double(initial.flat_parameters()[i])));
  }
  INFO("rank " << ctx.rank() << ": largest relative difference from the simulated workers " << worst);
  CHECK(worst < 1e-5);
  CHECK(moved > 1e-3);
}
