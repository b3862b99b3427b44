// ZeRO-3 over models built sharded (models/nn/param_store.h), as N ranks. A sharded build
// holds no rank's whole model, so ZeRO-3 cannot broadcast rank 0's parameters; it checks
// instead that every rank built the same model (every parameter's CRC). Here: ranks
// built alike pass; a rank built from another seed is named in the error that every
// rank throws; a sharded model handed to DDP, ZeRO-2 or a ZeRO-3 of another world size
// is refused before any collective.
#include <stdexcept>

#include "models/zoo/models.h"
#include "optim/optimizer.h"
#include "parallel/parallel_strategy.h"
#include "tests/support/dist_test.h"
#include "train/make_strategy.h"

using namespace dpt;

namespace {

ModelConfig sharded_gpt(uint64_t seed, int rank, int world) {
  ModelConfig cfg;
  cfg.seed = seed;
  cfg.d_model = 64;
  cfg.n_layer = 2;
  cfg.n_head = 2;
  cfg.seq_len = 16;
  cfg.resident_rank = rank;
  cfg.resident_world = world;
  return cfg;
}

std::unique_ptr<ParallelStrategy> strategy(int stage, Module& model, Communicator& comm) {
  StrategyConfig sc;
  sc.zero_stage = stage;
  return make_strategy(sc, model, comm, [](size_t n) { return make_optimizer("sgd", OptimizerConfig{}, n); });
}

}  // namespace

TEST_CASE("ZeRO-3 accepts ranks that built the same sharded model", "[sharded]") {
  Communicator& comm = test::world();
  auto model = make_model("gpt", sharded_gpt(7, comm.rank(), comm.size()));
  auto zero = strategy(3, *model, comm);
  bool ok = true;
  try {
    zero->broadcast_parameters();
  } catch (const std::exception& e) {
    ok = false;
    INFO(e.what());
  }
  REQUIRE(test::all_ok(ok, "broadcast_parameters threw on identical builds"));
}

TEST_CASE("ZeRO-3 names the rank that built a different sharded model", "[sharded]") {
  Communicator& comm = test::world();
  if (comm.size() < 2) return;
  const int odd = comm.size() - 1;  // this rank alone uses another seed
  auto model = make_model("gpt", sharded_gpt(comm.rank() == odd ? 8 : 7, comm.rank(), comm.size()));
  auto zero = strategy(3, *model, comm);
  std::string what;
  try {
    zero->broadcast_parameters();
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  INFO("error: '" << what << "'");
  const bool named = what.find("ranks [" + std::to_string(odd) + "] built different parameters") != std::string::npos;
  REQUIRE(test::all_ok(named, "the mismatch was not reported naming rank " + std::to_string(odd)));
}

TEST_CASE("a sharded model is refused by DDP, ZeRO-2 and a ZeRO-3 of another world", "[sharded]") {
  Communicator& comm = test::world();
  auto model = make_model("gpt", sharded_gpt(7, comm.rank(), comm.size()));
  CHECK_THROWS_AS(strategy(0, *model, comm), std::logic_error);
  CHECK_THROWS_AS(strategy(2, *model, comm), std::logic_error);
  auto other = make_model("gpt", sharded_gpt(7, 0, comm.size() + 1));
  CHECK_THROWS_WITH(strategy(3, *other, comm), Catch::Contains("built keeping elements"));
}
