// The backend registry (backends/registry.h, registration.h): names in the list's order,
// the built subset agreeing with configure (DPT_EXPECT_BUILT, set by CMake), unknown and
// not-built names answered with the valid and the missing ones, "auto" by launch, and the
// store, launcher-share and abort hooks. One process; no MPI job is started.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "comm/error.h"
#include "tests/support/launch_env_scope.h"

using namespace dpt;
using dpt::test::LaunchEnv;

namespace {

std::vector<std::string> expected_built() {
  const char* v = ::getenv("DPT_EXPECT_BUILT");  // "mpi,tcp,nccl": what configure found
  REQUIRE(v != nullptr);
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = v;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v)
    if (x == s) return true;
  return false;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace

TEST_CASE("registry: known names in the list's order, built ones as configured", "[registry]") {
  CHECK(backends::known() == std::vector<std::string>{"mpi", "tcp", "nccl", "auto"});
  CHECK(backends::available() == expected_built());
  CHECK(has(backends::available(), "tcp"));
  for (const auto& name : backends::known()) {
    if (name == "auto") continue;
    const std::string d = backends::describe(name);
    INFO(d);
    if (has(backends::available(), name)) {
      CHECK_THAT(d, Catch::StartsWith(name + ": built ("));
    } else {
      CHECK_THAT(d, Catch::StartsWith(name + ": not built (") && Catch::EndsWith(")"));
    }
  }
  CHECK(backends::describe("gloo") == "gloo: unknown");
}

TEST_CASE("registry: an unknown name lists the valid ones and those not built here", "[registry]") {
  LaunchEnv env({});
  try {
    backends::create("gloo");
    FAIL("created an unknown backend");
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    INFO(msg);
    std::string want = "unknown backend 'gloo'; valid backends: " + join(backends::available()) + ", auto";
    CHECK_THAT(msg, Catch::StartsWith(want));
    for (const auto& name : backends::known()) {
      if (name == "auto" || has(backends::available(), name)) continue;
      // "...; not built here: nccl (needs CUDA)"
      CHECK_THAT(msg, Catch::Contains("not built here: ") && Catch::Contains(name + " ("));
    }
    if (backends::available().size() + 1 == backends::known().size()) CHECK(msg == want);
  }
  CHECK(backends::resolve("gloo") == "gloo");  // only "auto" is resolved
}

TEST_CASE("registry: a backend not built here says why and which are built", "[registry]") {
  LaunchEnv env({});
  int not_built = 0;
  for (const auto& name : backends::known()) {
    if (name == "auto" || has(backends::available(), name)) continue;
    ++not_built;
    try {
      backends::create(name);
      FAIL("created " + name + ", which is not built");
    } catch (const NotBuiltError& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK_THAT(msg, Catch::StartsWith("backend '" + name + "' is not built (") &&
                          Catch::Contains("); built backends: " + join(backends::available()) + " (--backend tcp"));
    }
  }
  if (not_built == 0) SUCCEED("every known backend is built here");
}

TEST_CASE("registry: auto is mpi under an MPI launcher where built, else tcp", "[registry]") {
  const std::string mpi_or_tcp = has(backends::available(), "mpi") ? "mpi" : "tcp";
  {
    LaunchEnv env({});
    CHECK(backends::resolve("auto") == "tcp");
  }
  {
    LaunchEnv env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
    CHECK(backends::resolve("auto") == "tcp");
  }
  {
    LaunchEnv env({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
    CHECK(backends::resolve("auto") == mpi_or_tcp);
  }
  {
    LaunchEnv env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
    CHECK(backends::resolve("auto") == mpi_or_tcp);
  }
  {
    LaunchEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
    CHECK(backends::resolve("auto") == "tcp");  // srun without PMI: no MPI world to join
  }
  CHECK(backends::resolve("nccl") == "nccl");
}

TEST_CASE("registry: tcp and auto make a world of one without a launcher", "[registry]") {
  LaunchEnv env({});
  for (const std::string name : {"tcp", "auto"}) {
    auto c = backends::create(name);
    CHECK(c->rank() == 0);
    CHECK(c->size() == 1);
    CHECK(c->backend_name() == "tcp");
  }
}

TEST_CASE("registry: the store, launcher-share and abort hooks", "[registry]") {
  LaunchEnv env({});
  // Without an MPI launcher nothing is shared: the value comes back as given.
  CHECK(backends::share_over_mpi("29500") == "29500");
  // Without MPI initialized, abort_job has nothing to end and returns.
  backends::abort_job(3);

  std::vector<std::string> from_store;  // the backends offering create_in_store, in order
  for (const std::string name : {"mpi", "tcp"})
    if (has(backends::available(), name)) from_store.push_back(name);
  backends::StoreGroup g;
  g.group_name = "registry_test";
  for (const std::string name : {"nccl", "gloo"}) {
    g.backend = name;
    if (name == "nccl" && !has(backends::available(), "nccl")) {
      CHECK_THROWS_AS(backends::create_in_store(g, CommOptions{}), NotBuiltError);
      continue;
    }
    try {
      backends::create_in_store(g, CommOptions{});
      FAIL(name + " made from a store");
    } catch (const UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains("backend '" + name + "' cannot be made from a store; valid: " +
                                           join(from_store)));
    }
  }
}
