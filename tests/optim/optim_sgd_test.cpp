// SGD against torch.optim.SGD's update rule: literal values worked out by hand for the
// first steps, then a double-precision reference over many steps and elements.
#include <catch2/catch.hpp>

#include "optim/optimizer.h"
#include "optim/sgd.h"
#include "optim_test_util.h"

using dpt::Sgd;

namespace {

// Steps a one-element SGD with gradient `g` each step, returns the parameter after each.
std::vector<float> run_scalar(Sgd& opt, float p0, const std::vector<float>& grads, float lr) {
  std::vector<float> p = {p0}, out;
  for (float g : grads) {
    const std::vector<float> gv = {g};
    opt.step(p, gv, lr);
    out.push_back(p[0]);
  }
  return out;
}

}  // namespace

TEST_CASE("sgd: hand-computed steps", "[sgd]") {
  SECTION("plain: p -= lr * g") {
    Sgd opt(1);
    const auto p = run_scalar(opt, 1.0f, {0.5f, -2.0f}, 0.1f);
    CHECK(p[0] == Approx(0.95));
    CHECK(p[1] == Approx(1.15));
    CHECK(opt.state_buffers().empty());
    CHECK(opt.step_count() == 2);
  }
  SECTION("momentum 0.9: the first buffer is the gradient itself") {
    Sgd opt(1, 0.9f);
    // b1 = 0.5, p = 1 - 0.05 = 0.95; b2 = 0.45 + 0.5 = 0.95, p = 0.95 - 0.095 = 0.855;
    // b3 = 0.855 + 0.5 = 1.355, p = 0.855 - 0.1355 = 0.7195
    const auto p = run_scalar(opt, 1.0f, {0.5f, 0.5f, 0.5f}, 0.1f);
    CHECK(p[0] == Approx(0.95));
    CHECK(p[1] == Approx(0.855));
    CHECK(p[2] == Approx(0.7195));
    REQUIRE(opt.state_buffers().size() == 1);
    CHECK(opt.state_buffers()[0].first == "momentum_buffer");
    CHECK(opt.state_buffers()[0].second[0] == Approx(1.355));
  }
  SECTION("nesterov") {
    Sgd opt(1, 0.9f, 0.0f, true);
    // b1 = 0.5, d = 0.5 + 0.45 = 0.95, p = 0.905; b2 = 0.95, d = 0.5 + 0.855 = 1.355,
    // p = 0.905 - 0.1355 = 0.7695
    const auto p = run_scalar(opt, 1.0f, {0.5f, 0.5f}, 0.1f);
    CHECK(p[0] == Approx(0.905));
    CHECK(p[1] == Approx(0.7695));
  }
  SECTION("dampening 0.5 applies from the second step") {
    Sgd opt(1, 0.9f, 0.5f);
    // b1 = 0.5 (undamped), p = 0.95; b2 = 0.45 + 0.25 = 0.7, p = 0.95 - 0.07 = 0.88
    const auto p = run_scalar(opt, 1.0f, {0.5f, 0.5f}, 0.1f);
    CHECK(p[0] == Approx(0.95));
    CHECK(p[1] == Approx(0.88));
  }
  SECTION("weight decay is added to the gradient") {
    Sgd opt(1, 0.0f, 0.0f, false, 0.1f);
    // d = 0.5 + 0.1 = 0.6, p = 0.94; d = 0.5 + 0.094 = 0.594, p = 0.94 - 0.0594 = 0.8806
    const auto p = run_scalar(opt, 1.0f, {0.5f, 0.5f}, 0.1f);
    CHECK(p[0] == Approx(0.94));
    CHECK(p[1] == Approx(0.8806));
  }
}

TEST_CASE("sgd: matches the double-precision reference over many steps", "[sgd]") {
  struct Case {
    float momentum, dampening, wd;
    bool nesterov;
  };
  for (const Case c : {Case{0, 0, 0, false}, Case{0.9f, 0, 0, false}, Case{0.9f, 0, 1e-2f, true},
                       Case{0.8f, 0.3f, 5e-3f, false}, Case{0, 0, 1e-2f, false}}) {
    INFO("momentum " << c.momentum << " dampening " << c.dampening << " wd " << c.wd << " nesterov "
                     << c.nesterov);
    const size_t n = 257;
    auto p = dpt::testing::random_floats(n, 1);
    auto ref_p = dpt::testing::to_double(p);
    Sgd opt(n, c.momentum, c.dampening, c.nesterov, c.wd);
    dpt::testing::RefSgd ref{0.05, c.momentum, c.dampening, c.wd, c.nesterov, {}};
    for (int s = 0; s < 20; ++s) {
      const auto g = dpt::testing::random_floats(n, 100 + s);
      opt.step(p, g, 0.05f);
      ref.step(ref_p, dpt::testing::to_double(g));
    }
    double max_diff = 0;
    for (size_t i = 0; i < n; ++i) max_diff = std::max(max_diff, std::abs(p[i] - ref_p[i]));
    INFO("max |float - double reference| = " << max_diff);
    CHECK(max_diff < 1e-5);
  }
}

TEST_CASE("sgd: the vector loops give the scalar formula's bits", "[sgd]") {
  // The loops run on AVX-512 where the CPU has it, 4-wide elsewhere, in chunks on
  // parallel_for's threads; neither may fuse a multiply and an add (optim/CMakeLists.txt):
  // every element equals the formula computed one operation at a time in float.
  struct Case {
    float momentum, dampening, wd;
    bool nesterov;
  };
  for (const Case c : {Case{0, 0, 0, false}, Case{0.9f, 0, 0, false}, Case{0.9f, 0, 1e-2f, true},
                       Case{0.8f, 0.3f, 5e-3f, false}}) {
    INFO("momentum " << c.momentum << " dampening " << c.dampening << " wd " << c.wd << " nesterov " << c.nesterov);
    const size_t n = 3 * 65536 + 37;  // several of the step's parallel chunks, and a ragged end
    auto p = dpt::testing::random_floats(n, 3);
    std::vector<float> want = p, buf(n, 0.0f);
    Sgd opt(n, c.momentum, c.dampening, c.nesterov, c.wd);
    for (int s = 0; s < 3; ++s) {
      const auto g = dpt::testing::random_floats(n, 200 + s);
      opt.step(p, g, 0.05f);
      for (size_t i = 0; i < n; ++i) {
        volatile float d = g[i];  // volatile: each operation rounded on its own
        if (c.wd != 0.0f) {
          volatile float decay = c.wd * want[i];
          d = d + decay;
        }
        if (c.momentum != 0.0f) {
          if (s == 0) {
            buf[i] = d;
          } else {
            volatile float kept = buf[i] * c.momentum;
            volatile float added = (1.0f - c.dampening) * d;
            buf[i] = kept + added;
          }
          if (c.nesterov) {
            volatile float ahead = c.momentum * buf[i];
            d = d + ahead;
          } else {
            d = buf[i];
          }
        }
        volatile float delta = 0.05f * d;
        want[i] = want[i] - delta;
      }
    }
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i) differ += p[i] != want[i];
    CHECK(differ == 0);
  }
}

TEST_CASE("sgd: invalid settings and sizes", "[sgd]") {
  CHECK_THROWS_AS(Sgd(4, 0.0f, 0.0f, true), std::invalid_argument);  // nesterov, no momentum
  CHECK_THROWS_AS(Sgd(4, 0.9f, 0.1f, true), std::invalid_argument);  // nesterov, dampening
  CHECK_THROWS_AS(Sgd(4, -0.1f), std::invalid_argument);
  Sgd opt(4);
  std::vector<float> p(4), g(3);
  CHECK_THROWS_WITH(opt.step(p, g, 0.1f), Catch::Contains("owns 4 elements"));
}
