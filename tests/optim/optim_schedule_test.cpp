// Learning-rate schedules: values worked out by hand from the formulas in lr_schedule.h.
#include <catch2/catch.hpp>

#include "optim/lr_schedule.h"

TEST_CASE("lr schedule: constant", "[schedule]") {
  dpt::ConstantLr s(0.3f);
  CHECK(s.lr(0) == 0.3f);
  CHECK(s.lr(123456) == 0.3f);
}

TEST_CASE("lr schedule: step decays by gamma every step_size steps", "[schedule]") {
  dpt::StepLr s(1.0f, 3, 0.5f);
  const float expect[] = {1, 1, 1, 0.5f, 0.5f, 0.5f, 0.25f, 0.25f};
  for (int i = 0; i < 8; ++i) CHECK(s.lr(i) == Approx(expect[i]));
  CHECK(s.lr(30) == Approx(std::pow(0.5, 10)));
  CHECK_THROWS_AS(dpt::StepLr(1.0f, 0, 0.5f), std::invalid_argument);
}

TEST_CASE("lr schedule: cosine with linear warm-up", "[schedule]") {
  dpt::CosineWarmupLr s(1.0f, 4, 14, 0.1f);
  // Warm-up: (step + 1) / 4.
  CHECK(s.lr(0) == Approx(0.25));
  CHECK(s.lr(1) == Approx(0.5));
  CHECK(s.lr(3) == Approx(1.0));
  // Decay over steps 4..14: r = (step - 4) / 10; lr = 0.1 + 0.9 * (1 + cos(pi r)) / 2.
  CHECK(s.lr(4) == Approx(1.0));
  CHECK(s.lr(9) == Approx(0.55));  // r = 0.5
  CHECK(s.lr(6) == Approx(0.1 + 0.45 * (1 + std::cos(0.2 * M_PI))));
  CHECK(s.lr(13) == Approx(0.1 + 0.45 * (1 + std::cos(0.9 * M_PI))));
  CHECK(s.lr(14) == Approx(0.1));
  CHECK(s.lr(1000) == Approx(0.1));
  for (int i = 4; i < 14; ++i) CHECK(s.lr(i + 1) < s.lr(i));  // strictly decreasing

  dpt::CosineWarmupLr no_warmup(2.0f, 0, 4);
  CHECK(no_warmup.lr(0) == Approx(2.0));
  CHECK(no_warmup.lr(2) == Approx(1.0));
  CHECK_THROWS_AS(dpt::CosineWarmupLr(1.0f, 5, 5), std::invalid_argument);
}

TEST_CASE("lr schedule: factory", "[schedule]") {
  dpt::LrScheduleConfig c;
  c.lr = 0.5f;
  c.warmup_steps = 2;
  c.total_steps = 10;
  CHECK(dpt::make_lr_schedule("constant", c)->lr(7) == 0.5f);
  CHECK(dpt::make_lr_schedule("cosine", c)->lr(0) == Approx(0.25));
  c.step_size = 2;
  c.gamma = 0.1f;
  CHECK(dpt::make_lr_schedule("step", c)->lr(4) == Approx(0.005));
  CHECK_THROWS_WITH(dpt::make_lr_schedule("linear", c), Catch::Contains("constant, step, cosine"));
}
