// BatchNorm's kernels (models/kernels/cuda/batch_norm_kernels.cuh: channel moments, the
// forward with and without a fused ReLU, the gradient sums with the ReLU mask, dx; and
// batch_norm_stat_kernels.cuh: statistics, running buffers, parameter gradients and dx's
// coefficients) on CPU threads through tests/support/cuda_emulation.h, launched as
// gpu_cnn_ops.cu launches them (256 threads a block; one block per channel for the sums),
// chained as a training step chains them, against the CPU BatchNorm layer: y, the running
// buffers, the parameter gradients (accumulated onto earlier values) and dx, within 1e-4
// as docs/gpu.md states. C = 300 spans two blocks of the per-channel kernels, so the
// channel index and the once-only num_batches increment are exercised across blocks; the
// inputs sit on channel means up to 40 so a variance formula that cancels would show.
#include <catch2/catch.hpp>

#include "tests/support/cuda_emulation.h"
// The kernels after the emulation: they see its __global__, blockIdx, ...
#include "models/kernels/cuda/batch_norm_kernels.cuh"
#include "models/kernels/cuda/batch_norm_stat_kernels.cuh"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "models/nn/layers/batch_norm.h"
#include "models/nn/param_store.h"

using namespace dpt;
using namespace dpt::gpu::batch_norm_kernels;
using cuda_emulation::emulate_launch;

namespace {

constexpr int kN = 4, kC = 300, kS = 5;
constexpr unsigned kThreads = 256;
const dim3 kGrid((kC + kThreads - 1) / kThreads);

bool near(double got, double want, double tol) { return std::fabs(got - want) <= tol * (1.0 + std::fabs(want)); }

float at(const std::vector<float>& v, int n, int c, int s) { return v[(size_t(n) * kC + c) * kS + s]; }

struct Fixture {
  ParamStore store;
  BatchNorm bn{store, "bn", kC};
  size_t w = 0, b = 0, rm = 0, rv = 0, nb = 0;
  std::vector<float> x, dout;
  Tensor in;

  Fixture() {
    store.finalize();
    w = store.find("bn.weight");
    b = store.find("bn.bias");
    rm = store.find_buffer("bn.running_mean");
    rv = store.find_buffer("bn.running_var");
    nb = store.find_buffer("bn.num_batches_tracked");
    std::mt19937 rng(7);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (int c = 0; c < kC; ++c) {
      store.param(w)[c] = 1.0f + 0.5f * g(rng);
      store.param(b)[c] = 0.3f * g(rng);
      store.buffer(rm)[c] = 0.1f * g(rng);
      store.buffer(rv)[c] = 1.0f + 0.2f * std::fabs(g(rng));
    }
    store.buffer(nb)[0] = 3.0f;
    x.resize(size_t(kN) * kC * kS);
    dout.resize(x.size());
    for (int n = 0; n < kN; ++n)
      for (int c = 0; c < kC; ++c)
        for (int s = 0; s < kS; ++s) {
          x[(size_t(n) * kC + c) * kS + s] = float(c % 41) + (0.5f + float(c % 3)) * g(rng);
          dout[(size_t(n) * kC + c) * kS + s] = g(rng);
        }
    in.resize({kN, kC, kS});
    std::copy(x.begin(), x.end(), in.data());
  }
};

// The channel-sum kernels, one block per channel.
std::vector<double> moments(const std::vector<float>& x) {
  std::vector<double> sums(2 * kC, 0.0);
  emulate_launch(dim3(kC), dim3(kThreads), channel_moments_k, x.data(), kN, kC, kS, sums.data());
  return sums;
}
std::vector<double> grad_sums(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& dy,
                              const std::vector<float>& mean, bool relu) {
  std::vector<double> sums(2 * kC, 0.0);
  emulate_launch(dim3(kC), dim3(kThreads), batch_norm_grad_sums_k, x.data(), y.data(), dy.data(), mean.data(), kN, kC,
                 kS, relu, sums.data());
  return sums;
}
// The element kernels, one thread per value.
const size_t kTotal = size_t(kN) * kC * kS;
const dim3 kElementGrid(unsigned((kTotal + kThreads - 1) / kThreads));

}  // namespace

namespace {

// One training step's kernels against the layer; with relu, the fused BatchNorm + ReLU
// (the layer's output through max(., 0), its gradient masked where that output is 0).
void check_training_step(bool relu) {
  Fixture f;
  // The device side starts from the same buffers and gradients as the layer.
  std::vector<float> running_mean(f.store.buffer(f.rm), f.store.buffer(f.rm) + kC);
  std::vector<float> running_var(f.store.buffer(f.rv), f.store.buffer(f.rv) + kC);
  float num_batches = f.store.buffer(f.nb)[0];
  std::vector<float> grad_w(kC), grad_b(kC);
  for (int c = 0; c < kC; ++c) {
    grad_w[c] = 0.01f * float(c);  // earlier micro-steps' gradients: the kernel adds
    grad_b[c] = -0.02f * float(c);
    f.store.grad(f.w)[c] = grad_w[c];
    f.store.grad(f.b)[c] = grad_b[c];
  }

  ForwardContext ctx;
  ctx.training = true;
  const Tensor& y = f.bn.forward(f.in, ctx);
  std::vector<float> y_cpu(y.data(), y.data() + y.numel());
  if (relu)
    for (float& v : y_cpu) v = std::max(v, 0.0f);
  const double count = double(kN) * kS;
  std::vector<float> mean(kC), invstd(kC);
  const std::vector<double> sums = moments(f.x);
  emulate_launch(kGrid, dim3(kThreads), batch_norm_statistics_k, sums.data(), kC, count, 1e-5f, 0.1f, mean.data(),
                 invstd.data(), running_mean.data(), running_var.data(), &num_batches);
  CHECK(num_batches == f.store.buffer(f.nb)[0]);
  CHECK(num_batches == 4.0f);
  std::vector<float> y_dev(kTotal);
  emulate_launch(kElementGrid, dim3(kThreads), batch_norm_forward_k, f.x.data(), mean.data(), invstd.data(),
                 f.store.param(f.w), f.store.param(f.b), y_dev.data(), kC, kS, kTotal, relu);
  int bad = 0;
  for (int c = 0; c < kC; ++c) {
    bad += !near(running_mean[c], f.store.buffer(f.rm)[c], 1e-6);
    bad += !near(running_var[c], f.store.buffer(f.rv)[c], 1e-5);
  }
  for (size_t i = 0; i < kTotal; ++i) bad += !near(y_dev[i], y_cpu[i], 1e-4);
  CHECK(bad == 0);

  // The layer's backward gets the gradient the ReLU lets through; the kernels mask dy
  // themselves by the forward's output.
  std::vector<float> g_cpu = f.dout;
  if (relu)
    for (size_t i = 0; i < kTotal; ++i)
      if (!(y_cpu[i] > 0.0f)) g_cpu[i] = 0.0f;
  GradSink sink;
  sink.begin({1, 1}, [](size_t) {});
  Tensor dy({kN, kC, kS});
  std::copy(g_cpu.begin(), g_cpu.end(), dy.data());
  const Tensor& dx = f.bn.backward(dy, sink, true);
  const std::vector<double> gsums = grad_sums(f.x, y_dev, f.dout, mean, relu);
  std::vector<float> mean_g(kC), mean_gxhat(kC);
  emulate_launch(kGrid, dim3(kThreads), batch_norm_grad_finalize_k, gsums.data(), invstd.data(), kC, count,
                 grad_w.data(), grad_b.data(), mean_g.data(), mean_gxhat.data());
  std::vector<float> dx_dev(kTotal);
  emulate_launch(kElementGrid, dim3(kThreads), batch_norm_backward_input_k, f.x.data(), y_dev.data(), f.dout.data(),
                 mean.data(), invstd.data(), static_cast<const float*>(f.store.param(f.w)),
                 static_cast<const float*>(mean_g.data()), static_cast<const float*>(mean_gxhat.data()), dx_dev.data(),
                 kC, kS, kTotal, relu);
  bad = 0;
  for (int c = 0; c < kC; ++c) {
    bad += !near(grad_w[c], f.store.grad(f.w)[c], 1e-4);
    bad += !near(grad_b[c], f.store.grad(f.b)[c], 1e-4);
  }
  // dx's size is the gradient's, so it is compared at that scale (a value of dx that
  // cancels to near zero keeps float's absolute error, not a relative one).
  double scale = 0;
  for (size_t i = 0; i < kTotal; ++i) scale = std::max(scale, double(std::fabs(dx.data()[i])));
  for (size_t i = 0; i < kTotal; ++i) bad += std::fabs(dx_dev[i] - dx.data()[i]) > 1e-4 * scale;
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("BatchNorm kernels: a training step (moments, statistics, forward, gradient sums, dx) as the CPU layer",
          "[batch_norm_emulated]") {
  check_training_step(false);
}

TEST_CASE("BatchNorm kernels: the same with the fused ReLU (forward clamped, gradient masked)", "[batch_norm_emulated]") {
  check_training_step(true);
}

TEST_CASE("BatchNorm kernels: evaluation statistics and gradients as the CPU layer", "[batch_norm_emulated]") {
  Fixture f;
  std::vector<float> mean(kC), invstd(kC);
  emulate_launch(kGrid, dim3(kThreads), batch_norm_eval_statistics_k, f.store.buffer(f.rm), f.store.buffer(f.rv), kC,
                 1e-5f, mean.data(), invstd.data());
  ForwardContext ctx;
  ctx.training = false;
  const Tensor& y = f.bn.forward(f.in, ctx);
  int bad = 0;
  for (int c = 0; c < kC; ++c)
    for (int n = 0; n < kN; ++n)
      for (int s = 0; s < kS; ++s) {
        const float got = f.store.param(f.w)[c] * (at(f.x, n, c, s) - mean[c]) * invstd[c] + f.store.param(f.b)[c];
        bad += !near(got, y.data()[(size_t(n) * kC + c) * kS + s], 1e-5);
      }
  CHECK(bad == 0);
  // Evaluation's backward: the parameter gradients only (no dx coefficients).
  GradSink sink;
  sink.begin({1, 1}, [](size_t) {});
  Tensor dy({kN, kC, kS});
  std::copy(f.dout.begin(), f.dout.end(), dy.data());
  f.bn.backward(dy, sink, false);
  const std::vector<float> y_eval(y.data(), y.data() + y.numel());
  const std::vector<double> gsums = grad_sums(f.x, y_eval, f.dout, mean, false);
  std::vector<float> grad_w(kC, 0.0f), grad_b(kC, 0.0f);
  emulate_launch(kGrid, dim3(kThreads), batch_norm_grad_finalize_k, gsums.data(), invstd.data(), kC, 1.0,
                 grad_w.data(), grad_b.data(), static_cast<float*>(nullptr), static_cast<float*>(nullptr));
  bad = 0;
  for (int c = 0; c < kC; ++c) {
    bad += !near(grad_w[c], f.store.grad(f.w)[c], 1e-4);
    bad += !near(grad_b[c], f.store.grad(f.b)[c], 1e-4);
  }
  CHECK(bad == 0);
}
