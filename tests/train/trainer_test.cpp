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
