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
  dpt::AgreementCadence c(1.0);
  c.restart();
  CHECK(c.due(0, false));   // a pass's first step
  CHECK(c.propose(0) == 1);  // no pace yet
  c.agreed(0, 1);
  CHECK(c.due(1, false));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // 20 ms or more for one step: at most 50 steps fit in 1 s.
  const int32_t k = c.propose(1);
  CHECK(k >= 1);
  CHECK(k <= 50);
  c.agreed(1, 7);
  for (int64_t s = 2; s < 8; ++s) {
    CHECK_FALSE(c.due(s, false));
    CHECK(c.due(s, true));  // a round's end or the data's
  }
  CHECK(c.due(8, false));
  CHECK(c.count() == 2);
  c.restart();
  CHECK(c.due(9, false));
  dpt::AgreementCadence every(0.0);
  every.agreed(3, 1000);
  CHECK(every.due(4, false));
}
