// The device's softmax cross entropy kernel (models/kernels/cuda/softmax_xent_kernel.cuh) on CPU
// threads through tests/support/cuda_emulation.h, launched as gpu_ops.cu launches it
// (256 threads, one warp per row), into its own buffer and in place over the logits (the
// training step's layout, loss.h "over output"), against float64: each row's loss and
// every gradient element. Rows labelled at column 0 put the label in lane 0's columns, so
// a loss that read z[label] after the gradient pass would see the gradient (in place) and
// fail; 21 rows span three blocks, one partly empty; 1000 classes are not a multiple of
// 32; ignored rows must give zeros.
#include <catch2/catch.hpp>

#include "tests/support/cuda_emulation.h"
// The kernel after the emulation: it sees its __global__, blockIdx, ...
#include "models/kernels/cuda/softmax_xent_kernel.cuh"

#include <cmath>
#include <random>
#include <vector>

using namespace dpt::gpu::xent_kernels;
using cuda_emulation::emulate_launch;

namespace {

constexpr int kRows = 21, kClasses = 1000;
constexpr int32_t kIgnore = -100;
constexpr float kScale = 0.125f;

struct Problem {
  std::vector<float> z;
  std::vector<int32_t> labels;
};

Problem make_problem() {
  Problem p;
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<float> logit(-8.0f, 8.0f);
  std::uniform_int_distribution<int32_t> cls(0, kClasses - 1);
  p.z.resize(size_t(kRows) * kClasses);
  for (float& v : p.z) v = logit(gen);
  for (int r = 0; r < kRows; ++r) p.labels.push_back(r % 4 == 0 ? 0 : r % 4 == 1 ? kIgnore : r % 4 == 2 ? 31 : cls(gen));
  return p;
}

void run(const Problem& p, const float* z, float* g, std::vector<float>& row_loss) {
  row_loss.assign(kRows, -1.0f);
  const dim3 grid((kRows + kWarpsPerBlock - 1) / kWarpsPerBlock), block(kWarpsPerBlock * 32);
  emulate_launch(grid, block, [&] {
    softmax_xent_k(z, p.labels.data(), g, row_loss.data(), kRows, kClasses, kScale, kIgnore);
  });
}

void check_against_float64(const Problem& p, const std::vector<float>& g, const std::vector<float>& row_loss) {
  for (int r = 0; r < kRows; ++r) {
    const float* z = p.z.data() + size_t(r) * kClasses;
    const float* gr = g.data() + size_t(r) * kClasses;
    INFO("row " << r << " label " << p.labels[size_t(r)]);
    if (p.labels[size_t(r)] == kIgnore) {
      CHECK(row_loss[size_t(r)] == 0.0f);
      for (int j = 0; j < kClasses; ++j) REQUIRE(gr[j] == 0.0f);
      continue;
    }
    double mx = z[0];
    for (int j = 1; j < kClasses; ++j) mx = std::max(mx, double(z[j]));
    double s = 0;
    for (int j = 0; j < kClasses; ++j) s += std::exp(double(z[j]) - mx);
    const int label = p.labels[size_t(r)];
    const double loss = std::log(s) + mx - z[label];
    CHECK(std::fabs(row_loss[size_t(r)] - loss) <= 1e-5 * (1 + std::fabs(loss)));
    for (int j = 0; j < kClasses; ++j) {
      const double want = kScale * (std::exp(double(z[j]) - mx) / s - (j == label ? 1.0 : 0.0));
      REQUIRE(std::fabs(gr[j] - want) <= 1e-6 * kScale + 1e-5 * std::fabs(want));
    }
  }
}

}  // namespace

TEST_CASE("the device cross entropy kernel, into a buffer and over its logits", "[softmax_xent_emulated]") {
  const Problem p = make_problem();
  std::vector<float> g(p.z.size(), 1.0f), row_loss;
  SECTION("into its own buffer") {
    run(p, p.z.data(), g.data(), row_loss);
    check_against_float64(p, g, row_loss);
  }
  SECTION("in place over the logits") {
    std::vector<float> spent = p.z;
    run(p, spent.data(), spent.data(), row_loss);
    check_against_float64(p, spent, row_loss);
    // The same bits as the separate buffer's run.
    std::vector<float> kept_loss;
    run(p, p.z.data(), g.data(), kept_loss);
    CHECK(spent == g);
    CHECK(row_loss == kept_loss);
  }
}
