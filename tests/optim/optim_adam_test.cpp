// Adam and AdamW against torch's update rules: hand-computed first steps, then a double
// precision reference over many steps and elements.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "models/kernels/cpu/parallel_for.h"
#include "optim/adam.h"
#include "optim/optimizer.h"
#include "optim_test_util.h"

using dpt::Adam;
using dpt::AdamW;

TEST_CASE("adam: hand-computed steps", "[adam]") {
  // p0 = 1, lr 0.1, betas (0.9, 0.999), eps 1e-8, gradients 0.5, 0.25, -1.0.
  // Step 1: m = 0.05, v = 0.00025, m_hat = 0.5, v_hat = 0.25 -> p = 1 - 0.1*0.5/(0.5+1e-8)
  //         = 0.900000002.
  // Step 2: m = 0.07, v = 0.00031225, bc1 = 0.19, bc2 = 0.001999
  //         -> p = 0.9 - (0.1/0.19) * 0.07 / (sqrt(0.00031225)/sqrt(0.001999) + 1e-8)
  //         = 0.80678204048.  Step 3 likewise: 0.82741774289.
  std::vector<float> p = {1.0f};
  Adam adam(1);
  const std::vector<float> grads = {0.5f, 0.25f, -1.0f};
  const double expect[] = {0.900000002, 0.8067820404774624, 0.8274177428854115};
  for (int s = 0; s < 3; ++s) {
    adam.step(p, std::vector<float>{grads[s]}, 0.1f);
    CHECK(p[0] == Approx(expect[s]).epsilon(1e-6));
  }
  CHECK(adam.step_count() == 3);
  CHECK(adam.name() == "adam");

  // AdamW, weight_decay 0.1: p *= 1 - 0.01 first; 0.890000002, 0.78788204046, 0.80063892246.
  std::vector<float> q = {1.0f};
  AdamW adamw(1, 0.9f, 0.999f, 1e-8f, 0.1f);
  const double expect_w[] = {0.890000002, 0.7878820404574624, 0.8006389224608368};
  for (int s = 0; s < 3; ++s) {
    adamw.step(q, std::vector<float>{grads[s]}, 0.1f);
    CHECK(q[0] == Approx(expect_w[s]).epsilon(1e-6));
  }
  CHECK(adamw.name() == "adamw");
}

TEST_CASE("adam: eps is outside the square root", "[adam]") {
  // With a gradient of 1e-6 and eps 1e-3 the first step is lr * 1e-6 / (1e-6 + 1e-3); eps
  // inside the root would give lr * 1e-6 / sqrt(1e-12 + 1e-3), 30x smaller.
  std::vector<float> p = {0.0f};
  Adam adam(1, 0.9f, 0.999f, 1e-3f);
  adam.step(p, std::vector<float>{1e-6f}, 1.0f);
  CHECK(p[0] == Approx(-1e-6 / (1e-6 + 1e-3)).epsilon(1e-5));
}

TEST_CASE("adam/adamw: match the double-precision reference over many steps", "[adam]") {
  struct Case {
    float wd;
    bool decoupled;
    float beta1, beta2;
  };
  for (const Case c : {Case{0, false, 0.9f, 0.999f}, Case{1e-2f, false, 0.9f, 0.999f},
                       Case{0.1f, true, 0.9f, 0.95f}, Case{0, true, 0.8f, 0.99f}}) {
    INFO("wd " << c.wd << " decoupled " << c.decoupled << " betas " << c.beta1 << ", " << c.beta2);
    const size_t n = 131;
    auto p = dpt::testing::random_floats(n, 2);
    auto ref_p = dpt::testing::to_double(p);
    Adam opt(n, c.beta1, c.beta2, 1e-8f, c.wd, c.decoupled);
    dpt::testing::RefAdam ref{1e-2, c.beta1, c.beta2, 1e-8, c.wd, c.decoupled, {}, {}};
    for (int s = 0; s < 30; ++s) {
      const auto g = dpt::testing::random_floats(n, 500 + s, 0.1f);
      opt.step(p, g, 1e-2f);
      ref.step(ref_p, dpt::testing::to_double(g));
    }
    double max_diff = 0;
    for (size_t i = 0; i < n; ++i) max_diff = std::max(max_diff, std::abs(p[i] - ref_p[i]));
    INFO("max |float - double reference| = " << max_diff);
    CHECK(max_diff < 2e-5);
  }
}

TEST_CASE("adam: state buffers are named and restore exactly", "[adam]") {
  const size_t n = 50;
  auto p = dpt::testing::random_floats(n, 3);
  Adam a(n);
  for (int s = 0; s < 3; ++s) a.step(p, dpt::testing::random_floats(n, 10 + s), 1e-2f);
  auto bufs = a.state_buffers();
  REQUIRE(bufs.size() == 2);
  CHECK(bufs[0].first == "exp_avg");
  CHECK(bufs[1].first == "exp_avg_sq");
  CHECK(bufs[0].second.size() == n);

  // A fresh optimizer loaded with the state continues exactly like the original.
  Adam b(n);
  auto bb = b.state_buffers();
  for (size_t k = 0; k < 2; ++k)
    std::copy(bufs[k].second.begin(), bufs[k].second.end(), bb[k].second.begin());
  b.set_step_count(a.step_count());
  auto q = p;
  for (int s = 0; s < 2; ++s) {
    const auto g = dpt::testing::random_floats(n, 20 + s);
    a.step(p, g, 1e-2f);
    b.step(q, g, 1e-2f);
  }
  CHECK(p == q);
  // Without the step count the bias correction differs and so do the numbers.
  Adam c(n);
  auto cb = c.state_buffers();
  for (size_t k = 0; k < 2; ++k)
    std::copy(bb[k].second.begin(), bb[k].second.end(), cb[k].second.begin());
  auto r = q;
  c.step(r, dpt::testing::random_floats(n, 30), 1e-2f);
  b.step(q, dpt::testing::random_floats(n, 30), 1e-2f);
  CHECK(r != q);
}

TEST_CASE("adam: invalid settings", "[adam]") {
  CHECK_THROWS_AS(Adam(3, 1.0f), std::invalid_argument);
  CHECK_THROWS_AS(Adam(3, 0.9f, -0.1f), std::invalid_argument);
  CHECK_THROWS_AS(Adam(3, 0.9f, 0.999f, -1e-8f), std::invalid_argument);
  CHECK_THROWS_AS(AdamW(3, 0.9f, 0.999f, 1e-8f, -0.1f), std::invalid_argument);
}

TEST_CASE("adam: a step on parallel_for's threads gives the bits of one thread", "[adam]") {
  // 300,007 elements: several of Adam's chunks and a ragged last one. Run with
  // OPENBLAS_NUM_THREADS=2 (the CTest sets it) so the threaded step has two threads.
  REQUIRE(dpt::parallel_threads() >= 2);
  const size_t n = 300007;
  std::vector<float> grads(n), start(n);
  for (size_t i = 0; i < n; ++i) {
    start[i] = std::sin(0.37f * float(i));
    grads[i] = std::cos(0.11f * float(i)) * (i % 7 == 0 ? 1e-3f : 1.0f);
  }
  for (bool decoupled : {false, true}) {
    INFO((decoupled ? "adamw" : "adam"));
    Adam threaded(n, 0.9f, 0.999f, 1e-8f, 0.01f, decoupled), serial(n, 0.9f, 0.999f, 1e-8f, 0.01f, decoupled);
    std::vector<float> p = start, q = start;
    for (int s = 0; s < 3; ++s) {
      threaded.step(p, grads, 1e-3f);
      dpt::SerialLoopsScope one_thread;
      serial.step(q, grads, 1e-3f);
    }
    CHECK(std::memcmp(p.data(), q.data(), n * sizeof(float)) == 0);
  }
}
