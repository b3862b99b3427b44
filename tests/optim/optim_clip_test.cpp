// Clipping by global norm, as torch.nn.utils.clip_grad_norm_.
#include <catch2/catch.hpp>
#include <cmath>

#include "optim/clip_grad.h"
#include "optim_test_util.h"

TEST_CASE("clip_grad_norm: scales to max_norm and returns the norm before", "[clip]") {
  std::vector<float> g = {3.0f, 4.0f};
  CHECK(dpt::clip_grad_norm(g, 1.0f) == Approx(5.0));
  // coef = 1 / (5 + 1e-6)
  CHECK(g[0] == Approx(3.0 / (5.0 + 1e-6)).epsilon(1e-7));
  CHECK(g[1] == Approx(4.0 / (5.0 + 1e-6)).epsilon(1e-7));

  std::vector<float> small = {3.0f, 4.0f};
  CHECK(dpt::clip_grad_norm(small, 10.0f) == Approx(5.0));
  CHECK(small == std::vector<float>{3.0f, 4.0f});  // coefficient clamped to 1: untouched

  std::vector<float> zero(5, 0.0f);
  CHECK(dpt::clip_grad_norm(zero, 1.0f) == 0.0f);
  CHECK(zero == std::vector<float>(5, 0.0f));

  std::vector<float> bad = {1.0f, NAN};
  CHECK(std::isnan(dpt::clip_grad_norm(bad, 1.0f)));
  CHECK(std::isnan(bad[0]));  // as torch with error_if_nonfinite=False
}

TEST_CASE("clip_grad_norm: shards with a summed squared norm clip like the whole", "[clip]") {
  const size_t n = 10007;
  auto whole = dpt::testing::random_floats(n, 11);
  double naive = 0;
  for (float x : whole) naive += double(x) * double(x);
  CHECK(dpt::squared_norm(whole) == Approx(naive).epsilon(1e-12));

  auto sharded = whole;
  std::span<float> s(sharded);
  auto a = s.first(4000), b = s.subspan(4000);
  const double global_sq = dpt::squared_norm(a) + dpt::squared_norm(b);  // "allreduce"
  const float norm_a = dpt::clip_grad_norm(a, 2.0f, global_sq);
  const float norm_b = dpt::clip_grad_norm(b, 2.0f, global_sq);
  const float norm = dpt::clip_grad_norm(whole, 2.0f);
  CHECK(norm == Approx(std::sqrt(naive)));
  CHECK(norm_a == norm);
  CHECK(norm_b == norm);
  CHECK(whole == sharded);
  CHECK(std::sqrt(dpt::squared_norm(whole)) == Approx(2.0).epsilon(1e-5));
}

TEST_CASE("clip_coefficient", "[clip]") {
  CHECK(dpt::clip_coefficient(1.0f, 0.5f) == 1.0f);
  CHECK(dpt::clip_coefficient(1.0f, 4.0f) == Approx(1.0 / (4.0 + 1e-6)));
}
