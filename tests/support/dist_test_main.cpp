// Catch2 main for distributed tests: strips --backend NAME (default COMM_BACKEND or
// auto), creates the world communicator, runs the Catch session on every rank, and
// exits non-zero if any rank saw a failure. Output lines from ranks other than 0 are
// kept: a failure is printed by the rank where it happened.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>
#include <memory>
#include <vector>

#include "backends/registry.h"
#include "tests/support/dist_test.h"
#include "train/cpu_threads_setup.h"

namespace dpt::test {
namespace {
std::unique_ptr<Communicator> g_world;
std::string g_backend;
}  // namespace

Communicator& world() { return *g_world; }
const std::string& backend() { return g_backend; }

bool all_ok(bool ok, const std::string& what) {
  int32_t bad = ok ? 0 : 1;
  world().allreduce(make_buffer(&bad, 1), ReduceOp::max);
  if (!ok) FAIL_CHECK("rank " << world().rank() << ": " << what);
  else if (bad) FAIL_CHECK("rank " << world().rank() << ": another rank failed: " << what);
  return bad == 0;
}

}  // namespace dpt::test

int main(int argc, char** argv) {
  std::vector<char*> args;
  std::string backend = dpt::backends::default_name();
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      backend = argv[++i];
      continue;
    }
    args.push_back(argv[i]);
  }
  int rc = 0;
  try {
    // Threads per rank as the programs plan them (the ranks share this host's cores).
    dpt::setup_cpu_threads(argv, 0);
    dpt::test::g_world = dpt::backends::create(backend);
    dpt::test::g_backend = dpt::backends::resolve(backend);
    Catch::Session session;
    rc = session.applyCommandLine(static_cast<int>(args.size()), args.data());
    if (rc != 0) return rc;
    int failed = session.run();
    int32_t any = failed ? 1 : 0;
    dpt::test::world().allreduce(dpt::make_buffer(&any, 1), dpt::ReduceOp::max);
    rc = (failed || any) ? 1 : 0;
    dpt::test::world().barrier();
  } catch (const std::exception& e) {
    std::cerr << "fatal: " << e.what() << std::endl;
    dpt::test::g_world.reset();
    dpt::backends::abort_job(2);
    return 2;
  }
  dpt::test::g_world.reset();
  return rc;
}
