// The ToyModel trained by dpt::torch::ElasticLoop under launch --elastic, with failures
// injected at fixed steps, and the same steps done by one process for reference
// (tests/libtorch/elastic_kill.sh compares them).
//
//   elastic_steps --steps N --out FILE [--kill R:S] [--fail R:S] [--pace-ms M]   (launch --elastic)
//   elastic_steps --reference --steps N --out FILE --worlds S0:W0,S1:W1,...   (alone)
//   elastic_steps --misuse      (alone: ElasticLoop over a context that is not elastic)
//
// Samples: step s, rank r draws its batch from the seed 1000 s + r, so a step is the same
// samples whoever runs it, and the reference, one process over the concatenated batches
// of ranks 0 .. W-1 of the world W that ran step s, sees what the group saw. MSE over a
// concatenation of equal batches has the gradient DDP averages: the results agree within
// float32 rounding. SGD with momentum, so an optimizer state left behind shows too.
//
// R is the rank the process started with (generation 0). --kill R:S: that process
// SIGKILLs itself as step S's backward starts (a hook on the output's gradient), before
// its gradients go out: no one completes step S, and the survivors run it again. --fail R:S: that process throws a communication error right after step S's
// backward, once every other member has also finished that backward (they count
// themselves in the elastic store): they complete step S, it does not, and after the
// re-forming it must take their state (parameters and momentum) to be right.
// A process restarted by launch --max-restarts (taken back in by the members' loop) injects
// nothing and writes FILE.joined. --pace-ms M: each step takes at least M ms, so that a
// restarted process arrives while the members still train.
// Each process writes its final parameters (float32) to FILE.<R> and prints a summary.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/context_impl.h"
#include "api/trainer/elastic_setup.h"
#include "comm/error.h"
#include "dpt/torch/ddp.h"
#include "dpt/torch/elastic.h"
#include "examples/libtorch/models.h"

namespace {

constexpr int kBatch = 8;
constexpr double kLr = 0.05, kMomentum = 0.9;

std::pair<torch::Tensor, torch::Tensor> batch(int64_t step, int rank) {
  torch::manual_seed(static_cast<uint64_t>(1000 * step + rank));
  torch::Tensor x = torch::randn({kBatch, 10});
  return {x, torch::randn({kBatch, 5})};
}

std::pair<int, int64_t> rank_step(const std::string& v) {
  const size_t colon = v.find(':');
  if (colon == std::string::npos) throw std::invalid_argument("expected R:S, got '" + v + "'");
  return {std::stoi(v.substr(0, colon)), std::stoll(v.substr(colon + 1))};
}

ToyModel fresh_model() {
  torch::manual_seed(0);
  return ToyModel();
}

void write(const std::string& path, ToyModel& model) {
  std::vector<torch::Tensor> flat;
  for (const auto& p : model->parameters()) flat.push_back(p.detach().reshape({-1}));
  const torch::Tensor all = torch::cat(flat).contiguous();
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(all.data_ptr()), static_cast<std::streamsize>(all.numel() * sizeof(float)));
}

// One process over every step's global batch: the world that ran step s is the last
// S:W of --worlds with S <= s.
int reference(int64_t steps, const std::string& worlds, const std::string& out) {
  std::vector<std::pair<int64_t, int>> at;
  size_t begin = 0;
  while (begin < worlds.size()) {
    size_t end = worlds.find(',', begin);
    if (end == std::string::npos) end = worlds.size();
    const auto [first, second] = rank_step(worlds.substr(begin, end - begin));  // S:W
    at.emplace_back(static_cast<int64_t>(first), static_cast<int>(second));
    begin = end + 1;
  }
  ToyModel model = fresh_model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(kLr).momentum(kMomentum));
  for (int64_t step = 0; step < steps; ++step) {
    int world = 1;
    for (const auto& [s, w] : at)
      if (s <= step) world = w;
    std::vector<torch::Tensor> xs, ys;
    for (int r = 0; r < world; ++r) {
      auto [x, y] = batch(step, r);
      xs.push_back(x);
      ys.push_back(y);
    }
    optimizer.zero_grad();
    torch::mse_loss(model->forward(torch::cat(xs)), torch::cat(ys)).backward();
    optimizer.step();
  }
  write(out, model);
  return 0;
}

// The elastic store's counter of the members that finished step S's backward.
void count_in(dpt::Context& ctx, const std::string& key) { ctx.impl().elastic->store->add(key, 1); }

void wait_for(dpt::Context& ctx, const std::string& key, int64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ctx.impl().elastic->store->add(key, 0) < n) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("--fail: the peers never came to " + key);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 0;
  std::string out, worlds;
  std::pair<int, int64_t> kill_at{-1, -1}, fail_at{-1, -1};
  bool ref = false, misuse = false;
  int pace_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--steps") steps = std::stoll(value());
    else if (a == "--out") out = value();
    else if (a == "--kill") kill_at = rank_step(value());
    else if (a == "--fail") fail_at = rank_step(value());
    else if (a == "--worlds") worlds = value();
    else if (a == "--pace-ms") pace_ms = std::stoi(value());
    else if (a == "--reference") ref = true;
    else if (a == "--misuse") misuse = true;
    else throw std::invalid_argument("unknown argument " + a);
  }
  if (ref) return reference(steps, worlds, out);
  if (misuse) {  // alone: the loop over a context that is not elastic
    dpt::Context ctx = dpt::init(argc, argv);
    ToyModel model;
    dpt::torch::DistributedDataParallel ddp(model, ctx);
    torch::optim::SGD optimizer(model->parameters(), kLr);
    try {
      dpt::torch::ElasticLoop loop(ddp, optimizer);
    } catch (const std::logic_error& e) {
      std::printf("refused: %s\n", e.what());
      return 0;
    }
    return 1;
  }

  std::optional<dpt::Context> joined_ctx;
  try {
    joined_ctx.emplace(dpt::init(argc, argv, {.elastic = true}));
  } catch (const dpt::ElasticJobOver& e) {
    std::printf("%s\n", e.what());  // restarted after the members finished: nothing to do
    return 0;
  }
  dpt::Context& ctx = *joined_ctx;
  const bool restarted = ctx.impl().elastic->joining;
  const int start_rank = ctx.rank();
  const std::string who = restarted ? std::string("joined") : std::to_string(start_rank);
  ToyModel model = fresh_model();
  dpt::torch::DistributedDataParallel ddp(model, ctx);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(kLr).momentum(kMomentum));
  dpt::torch::ElasticLoop loop(ddp, optimizer);
  loop.on_reform([&](const dpt::torch::ElasticReform& r) {
    std::printf("start rank %s: generation %d, rank %d of %d, resuming at step %lld\n", who.c_str(), r.generation,
                r.rank, r.world_size, (long long)r.next_step);
  });
  bool failed_once = false;
  const dpt::torch::ElasticSummary s = loop.run(steps, [&](const dpt::torch::ElasticStep& at) {
    const auto paced = std::chrono::steady_clock::now() + std::chrono::milliseconds(pace_ms);
    auto [x, y] = batch(at.step, at.rank);
    optimizer.zero_grad();
    torch::Tensor pred = ddp.forward(x);
    if (!restarted && start_rank == kill_at.first && at.step == kill_at.second)
      pred.register_hook([](torch::Tensor g) {
        ::kill(::getpid(), SIGKILL);
        return g;
      });
    torch::mse_loss(pred, y).backward();
    const std::string key = "libtorch-test/fail/" + std::to_string(fail_at.second);
    if (!restarted && at.step == fail_at.second && !failed_once) {
      if (start_rank != fail_at.first) {
        count_in(ctx, key);
      } else {
        failed_once = true;
        wait_for(ctx, key, at.world_size - 1);
        dpt::ErrorContext where;
        where.rank = at.rank;
        where.op = "test";
        throw dpt::PeerError(where, "--fail " + std::to_string(fail_at.first) + ":" + std::to_string(fail_at.second) +
                                        ": an injected communication failure after the backward");
      }
    }
    optimizer.step();
    std::this_thread::sleep_until(paced);
  });
  write(out + "." + who, model);
  std::printf("start rank %s: summary steps=%lld recoveries=%d joins=%d lost_steps=%lld world_size=%d generation=%d\n",
              who.c_str(), (long long)s.steps, s.recoveries, s.joins, (long long)s.lost_steps, s.world_size,
              s.generation);
  return 0;
}
