// The single-process training path: the GEMM accounting behind the GFLOP/s figures,
// a short real run of the ToyModel that must learn its synthetic regression, and when the
// distributed trainer's ranks agree before a step (AgreementCadence).
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <thread>
#include <unistd.h>

#include "data/make_dataset.h"
#include "models/io/checkpoint.h"
#include "models/zoo/models.h"
#include "train/agreement_cadence.h"
#include "train/local_trainer.h"
#include "train/straggler_watch.h"

using namespace dpt;

TEST_CASE("trainer: model FLOPs are the GEMMs of one step, counted exactly", "[trainer]") {
  auto mlp = make_model("mlp", {});
  Batch b;
  b.n = 4;
  b.sample_shape = {1, 28, 28};
  b.x.assign(4 * 784, 0.1f);
  b.labels = {0, 1, 2, 3};
  GemmRecorder rec = record_step_gemms(*mlp, b);
  // forward y = x W^T, backward dW = dy^T x for all three layers; dx = dy W only for
  // fc2 and fc3 (nothing below fc1 has parameters, so its dx is skipped).
  const double fwd = 2.0 * (784 * 256 + 256 * 128 + 128 * 10);
  const double dx = 2.0 * (256 * 128 + 128 * 10);
  CHECK(rec.total_flops() == Approx(4 * (2 * fwd + dx)));
  for (float g : mlp->flat_grads()) REQUIRE(g == 0.0f);  // the probe step left no trace
  auto bench = benchmark_gemm_calls(rec, 0.05);
  CHECK(bench.gflops() > 0);
}

TEST_CASE("trainer: ToyModel learns synthetic regression, saves a loadable model", "[trainer]") {
  const auto path = std::filesystem::temp_directory_path() /
                    ("dpt_trainer_test_" + std::to_string(::getpid()) + ".safetensors");
  LocalTrainConfig cfg;
  cfg.model = "toy";
  cfg.epochs = 30;
  cfg.batch_size = 32;
  cfg.lr_config.lr = 1e-2f;
  cfg.measure_gemm = false;
  cfg.save_path = path.string();
  LocalTrainer trainer(cfg);
  const double before = trainer.evaluate_held_out().loss;
  LocalTrainResult r = trainer.run();
  REQUIRE(r.epochs.size() == 30);
  const double after = r.epochs.back().eval.loss;
  INFO("held-out MSE before " << before << ", after " << after);
  CHECK(after < 0.25 * before);
  CHECK(r.samples_per_s > 0);
  auto fresh = make_model("toy", {});
  Metadata meta = load_model(path.string(), *fresh);
  CHECK(meta.at("epochs") == "30");
  CHECK(std::equal(fresh->flat_params().begin(), fresh->flat_params().end(),
                   trainer.model().flat_params().begin()));
  std::filesystem::remove(path);
}

TEST_CASE("AgreementCadence: the world agrees where it must, at a pass's start, and on the interval") {
  using namespace std::chrono_literals;
  // Made-up times, so the proposals are exact on any machine under any load.
  const auto t0 = dpt::AgreementCadence::Clock::time_point{} + 100s;
  dpt::AgreementCadence c(1.0);
  c.restart();
  CHECK(c.due(0, false));  // a pass's first step
  CHECK(c.propose(0, t0) == 1);  // no pace yet
  c.agreed(0, 1, t0);
  CHECK(c.due(1, false));
  // 4 steps in 0.5 s: 0.125 s a step, so 8 fit in the 1 s interval (64 would agree 8x too
  // seldom, 1 before every step).
  CHECK(c.propose(4, t0 + 500ms) == 8);
  CHECK(c.propose(4, t0 + 250ms) == 16);   // 0.0625 s a step
  CHECK(c.propose(4, t0 + 4100ms) == 1);   // slower than the interval: the next step, never 0
  CHECK(c.propose(4, t0) == INT32_MAX);    // no time passed: nothing limits it
  c.agreed(4, 7, t0 + 500ms);
  for (int64_t s = 5; s < 11; ++s) {
    CHECK_FALSE(c.due(s, false));
    CHECK(c.due(s, true));  // a round's end or the data's
  }
  CHECK(c.due(11, false));
  // The pace is measured from the last agreement: 8 steps in 0.25 s, 32 fit.
  CHECK(c.propose(12, t0 + 750ms) == 32);
  CHECK(c.count() == 2);
  c.restart();
  CHECK(c.due(13, false));
  CHECK(c.propose(13, t0 + 1s) == 1);  // a new pass: no pace yet
  dpt::AgreementCadence every(0.0);
  every.agreed(3, 1000, t0);
  CHECK(every.due(4, false));
  CHECK(every.propose(4, t0 + 1s) == 1);
  // The overloads without a time read the clock: 1 step of at least 20 ms, at most 50 fit.
  dpt::AgreementCadence clock(1.0);
  clock.restart();
  clock.agreed(0, 1);
  std::this_thread::sleep_for(20ms);
  const int32_t k = clock.propose(1);
  CHECK(k >= 1);
  CHECK(k <= 50);
}

// Three ranks' watches, their slots combined as the agreement's min-allreduce combines them.
TEST_CASE("straggler watch: the slowest rank and its ratio from the agreement's slots, named after 8 in a row") {
  std::vector<dpt::StragglerWatch> w(3, dpt::StragglerWatch(1.3));
  auto agree = [&](std::vector<double> step_s, int64_t step) {
    int32_t all[2] = {INT32_MAX, INT32_MAX};
    for (int r = 0; r < 3; ++r) {
      w[size_t(r)].add_compute(step_s[size_t(r)]);
      int32_t mine[2];
      w[size_t(r)].fill(mine, r, 3);
      all[0] = std::min(all[0], mine[0]);
      all[1] = std::min(all[1], mine[1]);
    }
    std::string line;
    for (auto& x : w) line = x.read(all, step);  // every rank reads the same
    return line;
  };
  for (int s = 1; s <= 3; ++s) CHECK(agree({0.010, 0.010, 0.010}, s).empty());  // fewer than kMinSteps
  std::string named;
  int64_t at = 0;
  for (int s = 4; s <= 40 && named.empty(); ++s) {
    named = agree({0.010, 0.011, 0.030}, s);  // rank 2 three times the fastest
    at = s;
  }
  INFO(named);
  CHECK_THAT(named, Catch::Contains("straggler: rank 2 computes") && Catch::Contains("(rank 0)"));
  REQUIRE(w[0].current());
  CHECK(w[0].current()->rank == 2);
  // Ratio >= 1.3 from step 4 (window mean 1.5x) on: named at the 8th such agreement, step 11,
  // where rank 2's window holds 3 steps of 10 ms and 8 of 30 ms against rank 0's 10 ms.
  CHECK(at == 11);
  CHECK(w[0].current()->ratio == Approx((3 * 0.010 + 8 * 0.030) / 11 / 0.010).epsilon(0.002));
  std::string cleared;
  for (int s = 41; s <= 80 && cleared.empty(); ++s) cleared = agree({0.010, 0.010, 0.011}, s);
  CHECK_THAT(cleared, Catch::Contains("rank 2 is back"));
  CHECK_FALSE(w[1].current());
}
