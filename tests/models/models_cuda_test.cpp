// Models on CUDA against the same models on the CPU: identical parameters and inputs,
// then forward, loss and backward on both; outputs, loss and every gradient must agree
// to float32 rounding (relative error ||cuda - cpu|| / ||cpu||). [cuda] cases need a
// GPU: the binary's main exits 77 (CTest: skipped) without one when run with [cuda].
// [cuda_errors] cases run everywhere: the refusals a user sees without a GPU or with a
// model that has no CUDA path.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "device/runtime.h"
#include "models/models.h"
#include "models_test_util.h"

using namespace dpt;

namespace {

ModelConfig small_gpt() {
  ModelConfig cfg;
  cfg.vocab = 61;       // odd sizes: no kernel may rely on multiples of 32
  cfg.seq_len = 37;
  cfg.d_model = 48;
  cfg.n_layer = 2;
  cfg.n_head = 3;
  return cfg;
}

double rel_error(std::span<const float> got, std::span<const float> want) {
  double d2 = 0, w2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    d2 += double(got[i] - want[i]) * (got[i] - want[i]);
    w2 += double(want[i]) * want[i];
  }
  return w2 > 0 ? std::sqrt(d2 / w2) : std::sqrt(d2);
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> tokens, labels;
  std::vector<float> values;
  ModelInput in;
  ModelTarget target;
};

Batch make_batch(const Module& m, int64_t n, uint64_t seed) {
  Batch b;
  std::mt19937_64 gen(seed);
  b.in.n = n;
  b.in.sample_shape = m.sample_shape();
  const size_t per = shape_numel(m.sample_shape());
  if (m.takes_tokens()) {
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(small_gpt().vocab - 1));
    for (size_t i = 0; i < n * per; ++i) b.tokens.push_back(tok(gen));
    for (size_t i = 0; i < n * per; ++i) b.labels.push_back(tok(gen));
    b.in.tokens = b.tokens.data();
    b.target.labels = b.labels.data();
  } else {
    b.x.resize(n * per);
    testing::fill_random(b.x, seed);
    b.in.x = b.x.data();
    if (m.loss_fn().name() == "mse") {
      b.values.resize(n * 5);
      testing::fill_random(b.values, seed + 1);
      b.target.values = b.values.data();
    } else {
      std::uniform_int_distribution<int32_t> cls(0, 9);
      for (int64_t i = 0; i < n; ++i) b.labels.push_back(cls(gen));
      b.target.labels = b.labels.data();
    }
  }
  return b;
}

}  // namespace

TEST_CASE("models on cuda compute what they compute on the cpu", "[cuda]") {
  for (const std::string name : {"toy", "mlp", "gpt"}) {
    DYNAMIC_SECTION(name) {
      const ModelConfig cfg = name == "gpt" ? small_gpt() : ModelConfig{};
      auto cpu = make_model(name, cfg);
      auto gpu = make_model(name, cfg);
      gpu->to_cuda(0);
      REQUIRE(gpu->on_cuda());
      // Two micro-batches accumulate: the device gradients must add up like the host's.
      for (int micro = 0; micro < 2; ++micro) {
        Batch b = make_batch(*cpu, name == "gpt" ? 5 : 7, 100 + micro);
        const float l_cpu = cpu->train_step(b.in, b.target, 0.5f);
        const float l_gpu = gpu->train_step(b.in, b.target, 0.5f);
        INFO("micro-batch " << micro << ": loss cpu " << l_cpu << " cuda " << l_gpu);
        CHECK(std::abs(l_gpu - l_cpu) <= 1e-5 * std::max(1.0f, std::abs(l_cpu)));
        const Tensor& out_gpu = gpu->host_output();
        REQUIRE(out_gpu.numel() == cpu->output().numel());
        CHECK(rel_error(out_gpu.span(), cpu->output().span()) < 1e-5);
      }
      // Every gradient reached the host buffer when it became final (on_grad_ready).
      for (const ParamInfo& p : cpu->param_infos()) {
        INFO(p.name);
        CHECK(rel_error(gpu->store().grad_span(p.index), cpu->store().grad_span(p.index)) < 1e-4);
      }
      // A parameter change on the host reaches the device at the next forward.
      for (Module* m : {cpu.get(), gpu.get()}) {
        auto params = m->flat_params();
        for (size_t i = 0; i < params.size(); i += 3) params[i] *= 0.5f;
        m->zero_grad();
      }
      Batch b = make_batch(*cpu, 3, 7);
      const float l_cpu = cpu->train_step(b.in, b.target);
      const float l_gpu = gpu->train_step(b.in, b.target);
      CHECK(std::abs(l_gpu - l_cpu) <= 1e-5 * std::max(1.0f, std::abs(l_cpu)));
      CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < 1e-4);
    }
  }
}

TEST_CASE("attention and layer norm agree at a longer sequence", "[cuda]") {
  ModelConfig cfg = small_gpt();
  cfg.seq_len = 130;  // rows longer than a warp's stride several times over
  cfg.d_model = 96;
  cfg.n_head = 4;
  auto cpu = make_model("gpt", cfg);
  auto gpu = make_model("gpt", cfg);
  gpu->to_cuda(0);
  Batch b = make_batch(*cpu, 2, 5);
  const float l_cpu = cpu->train_step(b.in, b.target);
  const float l_gpu = gpu->train_step(b.in, b.target);
  CHECK(std::abs(l_gpu - l_cpu) <= 1e-5 * std::abs(l_cpu));
  CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < 1e-4);
}

// gpt2: Conv1D layouts, dropout 0.1 (the CPU's counter-based masks, computed again by the
// kernel) and ignored labels (-100) must give the CPU's numbers too.
TEST_CASE("gpt2 with dropout and ignored labels agrees with the cpu", "[cuda]") {
  ModelConfig cfg = small_gpt();
  cfg.n_positions = 64;
  cfg.dropout = 0.1f;
  auto cpu = make_model("gpt2", cfg);
  auto gpu = make_model("gpt2", cfg);
  gpu->to_cuda(0);
  for (int step = 0; step < 2; ++step) {  // two steps: the second draws other masks
    Batch b = make_batch(*cpu, 3, 40 + step);
    for (size_t i = 0; i < b.labels.size(); i += 4) b.labels[i] = -100;
    cpu->zero_grad();
    gpu->zero_grad();
    const float l_cpu = cpu->train_step(b.in, b.target);
    const float l_gpu = gpu->train_step(b.in, b.target);
    INFO("step " << step << ": loss cpu " << l_cpu << " cuda " << l_gpu);
    CHECK(std::abs(l_gpu - l_cpu) <= 1e-5 * std::abs(l_cpu));
    CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < 1e-4);
  }
}

TEST_CASE("a model without a CUDA path, or no GPU, is refused by name", "[cuda_errors]") {
  for (const std::string name : {"cnn", "resnet18"}) {
    auto cnn = make_model(name, {});
    try {
      cnn->to_cuda(0);
      FAIL(name + " went to cuda");
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains("conv1") && Catch::Contains("no CUDA kernels"));
    }
    CHECK_FALSE(cnn->on_cuda());
  }
  std::string why;
  if (device::kernel_device_count(&why) == 0) {
    auto mlp = make_model("mlp", {});
    try {
      mlp->to_cuda(0);
      FAIL("mlp went to cuda without a GPU");
    } catch (const device::DeviceError& e) {
      CHECK_THAT(e.what(), Catch::Contains("no CUDA device 0"));
    }
    CHECK_FALSE(mlp->on_cuda());
  }
}

// Run with DPT_EMULATE_DEVICE=1 (models_cuda_refuses_emulated): the emulated device is
// host memory for comm/'s staging paths; a model's kernels must never be handed it.
TEST_CASE("a model is refused the emulated device", "[cuda_emulated]") {
  REQUIRE(device::emulated());
  auto mlp = make_model("mlp", {});
  try {
    mlp->to_cuda(0);
    FAIL("mlp went to the emulated device");
  } catch (const device::DeviceError& e) {
    CHECK_THAT(e.what(), Catch::Contains("DPT_EMULATE_DEVICE=1") && Catch::Contains("runs no model kernels"));
  }
  CHECK_FALSE(mlp->on_cuda());
}
