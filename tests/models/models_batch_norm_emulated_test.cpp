// BatchNorm's per-channel kernels (models/kernels/cuda/batch_norm_stat_kernels.cuh) on CPU threads
// through tests/support/cuda_emulation.h, launched as gpu_cnn_ops.cu launches them (256
// threads a block, blocks_for(C)), against the CPU BatchNorm layer: the training
// statistics and the running buffers' update, the evaluation statistics, the parameter
// gradients (accumulated onto earlier values) and dx's coefficients. The channel sums the
// kernels start from are computed here as channel_moments and batch_norm_grad_sums define
// them. C = 300 spans two blocks, so the channel index and the once-only num_batches
// increment are exercised across blocks; the inputs sit on channel means up to 40 so a
// variance formula that cancels would show.
#include <catch2/catch.hpp>

#include "tests/support/cuda_emulation.h"
// The kernels after the emulation: they see its __global__, blockIdx, ...
#include "models/kernels/cuda/batch_norm_stat_kernels.cuh"

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

// channel_moments: sums[c] = sum of x, sums[C + c] = squared deviations from
// float(sum / count), each in double.
std::vector<double> moments(const std::vector<float>& x) {
  std::vector<double> sums(2 * kC, 0.0);
  const double count = double(kN) * kS;
  for (int c = 0; c < kC; ++c) {
    for (int n = 0; n < kN; ++n)
      for (int s = 0; s < kS; ++s) sums[c] += at(x, n, c, s);
    const float mean = float(sums[c] / count);
    for (int n = 0; n < kN; ++n)
      for (int s = 0; s < kS; ++s) {
        const float d = at(x, n, c, s) - mean;
        sums[kC + c] += double(d * d);
      }
  }
  return sums;
}

// batch_norm_grad_sums: sums[c] = sum g, sums[C + c] = sum g (x - mean), in double.
std::vector<double> grad_sums(const std::vector<float>& x, const std::vector<float>& g, const std::vector<float>& mean) {
  std::vector<double> sums(2 * kC, 0.0);
  for (int c = 0; c < kC; ++c)
    for (int n = 0; n < kN; ++n)
      for (int s = 0; s < kS; ++s) {
        sums[c] += at(g, n, c, s);
        sums[kC + c] += double(at(g, n, c, s)) * double(at(x, n, c, s) - mean[c]);
      }
  return sums;
}

}  // namespace

TEST_CASE("BatchNorm kernels: training statistics, running buffers, gradients and dx as the CPU layer",
          "[batch_norm_emulated]") {
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
  const double count = double(kN) * kS;
  std::vector<float> mean(kC), invstd(kC);
  const std::vector<double> sums = moments(f.x);
  emulate_launch(kGrid, dim3(kThreads), batch_norm_statistics_k, sums.data(), kC, count, 1e-5f, 0.1f, mean.data(),
                 invstd.data(), running_mean.data(), running_var.data(), &num_batches);
  CHECK(num_batches == f.store.buffer(f.nb)[0]);
  CHECK(num_batches == 4.0f);
  const std::vector<float> y_cpu(y.data(), y.data() + y.numel());
  int bad = 0;
  for (int c = 0; c < kC; ++c) {
    bad += !near(running_mean[c], f.store.buffer(f.rm)[c], 1e-6);
    bad += !near(running_var[c], f.store.buffer(f.rv)[c], 1e-5);
    for (int n = 0; n < kN; ++n)
      for (int s = 0; s < kS; ++s) {
        const float want = at(y_cpu, n, c, s);
        const float got = f.store.param(f.w)[c] * (at(f.x, n, c, s) - mean[c]) * invstd[c] + f.store.param(f.b)[c];
        bad += !near(got, want, 1e-4);
      }
  }
  CHECK(bad == 0);

  GradSink sink;
  sink.begin({1, 1}, [](size_t) {});
  Tensor dy({kN, kC, kS});
  std::copy(f.dout.begin(), f.dout.end(), dy.data());
  const Tensor& dx = f.bn.backward(dy, sink, true);
  const std::vector<double> gsums = grad_sums(f.x, f.dout, mean);
  std::vector<float> mean_g(kC), mean_gxhat(kC);
  emulate_launch(kGrid, dim3(kThreads), batch_norm_grad_finalize_k, gsums.data(), invstd.data(), kC, count,
                 grad_w.data(), grad_b.data(), mean_g.data(), mean_gxhat.data());
  bad = 0;
  for (int c = 0; c < kC; ++c) {
    bad += !near(grad_w[c], f.store.grad(f.w)[c], 1e-4);
    bad += !near(grad_b[c], f.store.grad(f.b)[c], 1e-4);
    const float k = f.store.param(f.w)[c] * invstd[c];
    for (int n = 0; n < kN; ++n)
      for (int s = 0; s < kS; ++s) {
        const float g = at(f.dout, n, c, s), xhat = (at(f.x, n, c, s) - mean[c]) * invstd[c];
        const float got = k * (g - mean_g[c] - xhat * mean_gxhat[c]);
        bad += !near(got, dx.data()[(size_t(n) * kC + c) * kS + s], 1e-4);
      }
  }
  CHECK(bad == 0);
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
  const std::vector<double> gsums = grad_sums(f.x, f.dout, mean);
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
