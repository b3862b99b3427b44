// The layers' loops (LayerNorm, GELU, residual adds, the attention softmax, the loss)
// give on parallel_for's threads the bits they give on one: a GPT training step with the
// loops threaded against the same step with SerialLoopsScope, every gradient and the
// loss compared bit for bit, in fp32 and with bf16 products. The products themselves run
// the same way in both (their thread count is the process's), so only the loops differ.
// Registered with OPENBLAS_NUM_THREADS=2 under each GEMM engine of the build (with
// DPT_GEMM=onednn the loops run on oneDNN's OpenMP team: models/kernels/cpu/parallel_for.h).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "models/kernels/cpu/gemm.h"
#include "models/zoo/models.h"
#include "models/kernels/cpu/parallel_for.h"

using namespace dpt;

namespace {

// Big enough that every loop splits into several chunks: 512 rows of width 128
// (LayerNorm, GELU, adds, loss), 4 heads x 64 rows of scores per sample.
ModelConfig threaded_config() {
  ModelConfig cfg;
  cfg.vocab = 61;
  cfg.seq_len = 64;
  cfg.d_model = 128;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  return cfg;
}

struct StepResult {
  float loss = 0;
  std::vector<float> grads;
};

StepResult gpt_step(GemmPrecision precision, bool serial_loops) {
  auto m = make_model("gpt", threaded_config());
  m->set_gemm_precision(precision);
  const int64_t n = 8, t = 64;
  std::mt19937 gen{7};
  std::vector<int32_t> tokens(n * t), labels(n * t);
  for (auto& v : tokens) v = int32_t(gen() % 61);
  for (auto& v : labels) v = int32_t(gen() % 61);
  ModelInput in;
  in.n = n;
  in.sample_shape = m->sample_shape();
  in.tokens = tokens.data();
  ModelTarget target{labels.data(), nullptr};
  StepResult r;
  if (serial_loops) {
    SerialLoopsScope serial;
    r.loss = m->train_step(in, target);
  } else {
    r.loss = m->train_step(in, target);
  }
  r.grads.assign(m->flat_grads().begin(), m->flat_grads().end());
  return r;
}

void require_same_bits(const StepResult& threaded, const StepResult& serial) {
  CHECK(std::memcmp(&threaded.loss, &serial.loss, sizeof(float)) == 0);
  REQUIRE(threaded.grads.size() == serial.grads.size());
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < serial.grads.size(); ++i)
    if (std::memcmp(&threaded.grads[i], &serial.grads[i], sizeof(float)) != 0 && differ++ == 0) first = i;
  INFO(differ << " of " << serial.grads.size() << " gradients differ, first at " << first);
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("gpt step: threaded loops give the bits of serial loops", "[threads]") {
  REQUIRE(parallel_threads() >= 2);  // else the threaded step is the serial one: nothing tested
  INFO("GEMM engine: " << gemm_engine_description());
  SECTION("fp32 products") { require_same_bits(gpt_step(GemmPrecision::f32, false), gpt_step(GemmPrecision::f32, true)); }
  SECTION("bf16 products") {
    INFO(bf16_gemm_description());
    require_same_bits(gpt_step(GemmPrecision::bf16, false), gpt_step(GemmPrecision::bf16, true));
  }
}
