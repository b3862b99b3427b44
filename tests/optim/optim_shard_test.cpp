// The ZeRO property: optimizers that own slices of a buffer, stepped separately, produce
// bit-for-bit what one optimizer stepping the whole buffer produces. Also the factory.
#include <catch2/catch.hpp>

#include "optim/optimizer.h"
#include "optim_test_util.h"

namespace {

dpt::OptimizerConfig config_for(const std::string& name) {
  dpt::OptimizerConfig c;
  if (name == "sgd") {
    c.momentum = 0.9f;
    c.nesterov = true;
    c.weight_decay = 1e-3f;
  } else {
    c.weight_decay = name == "adamw" ? 0.05f : 1e-3f;
  }
  return c;
}

}  // namespace

TEST_CASE("optimizers: stepping two shards equals stepping the whole buffer", "[shard]") {
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    // Uneven shards with odd sizes, so the vectorized loop bodies and their scalar tails
    // fall on different elements in the two runs.
    for (size_t cut : {size_t(500), size_t(333), size_t(1)}) {
      INFO(name << " cut at " << cut);
      const size_t n = 1001;
      auto whole = dpt::testing::random_floats(n, 7);
      auto sharded = whole;
      const auto cfg = config_for(name);
      auto opt = dpt::make_optimizer(name, cfg, n);
      auto lo = dpt::make_optimizer(name, cfg, cut);
      auto hi = dpt::make_optimizer(name, cfg, n - cut);
      for (int s = 0; s < 6; ++s) {
        const auto g = dpt::testing::random_floats(n, 40 + s);
        const float lr = 0.01f * float(s + 1);
        opt->step(whole, g, lr);
        std::span<float> p(sharded);
        std::span<const float> gs(g);
        lo->step(p.first(cut), gs.first(cut), lr);
        hi->step(p.subspan(cut), gs.subspan(cut), lr);
      }
      CHECK(whole == sharded);
      // The shards' state is the whole state, cut.
      auto ws = opt->state_buffers(), ls = lo->state_buffers(), hs = hi->state_buffers();
      REQUIRE(ws.size() == ls.size());
      for (size_t k = 0; k < ws.size(); ++k) {
        CHECK(std::equal(ls[k].second.begin(), ls[k].second.end(), ws[k].second.begin()));
        CHECK(std::equal(hs[k].second.begin(), hs[k].second.end(),
                         ws[k].second.begin() + std::ptrdiff_t(cut)));
      }
    }
  }
}

TEST_CASE("make_optimizer: names and configuration", "[shard]") {
  dpt::OptimizerConfig c;
  c.momentum = 0.9f;
  auto sgd = dpt::make_optimizer("sgd", c, 10);
  CHECK(sgd->name() == "sgd");
  CHECK(sgd->numel() == 10);
  REQUIRE(sgd->state_buffers().size() == 1);
  CHECK(sgd->state_buffers()[0].second.size() == 10);
  CHECK(dpt::make_optimizer("sgd", {}, 10)->state_buffers().empty());
  CHECK(dpt::make_optimizer("adam", c, 10)->name() == "adam");
  CHECK(dpt::make_optimizer("adamw", c, 10)->name() == "adamw");
  CHECK_THROWS_WITH(
      dpt::make_optimizer("lamb", c, 10),
      Catch::Contains("unknown optimizer 'lamb'") && Catch::Contains("sgd, adam, adamw"));
  c.nesterov = true;
  c.dampening = 0.5f;
  CHECK_THROWS_AS(dpt::make_optimizer("sgd", c, 10), std::invalid_argument);

  // AdamW from the factory uses the configured weight decay, decoupled: with a zero
  // gradient Adam's update is 0/(0+eps) = 0, leaving only p * (1 - lr * wd).
  dpt::OptimizerConfig w;
  w.weight_decay = 0.5f;
  auto adamw = dpt::make_optimizer("adamw", w, 1);
  std::vector<float> p = {2.0f};
  adamw->step(p, std::vector<float>{0.0f}, 0.1f);
  CHECK(p[0] == Approx(2.0 * (1 - 0.05)));
}
