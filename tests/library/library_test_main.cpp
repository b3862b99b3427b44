// Catch2 main for the public API's tests: dpt::init reads --backend and --threads (and
// the launcher's variables), the rest of the command line goes to Catch; the run fails
// on every rank when any rank saw a failure.
#define CATCH_CONFIG_RUNNER
#include "tests/library/library_test.h"

#include <cstring>
#include <iostream>
#include <optional>
#include <vector>

namespace dpt::library_test {
namespace {
std::optional<Context> g_context;
}
Context& context() { return *g_context; }
}  // namespace dpt::library_test

int main(int argc, char** argv) {
  std::vector<char*> catch_args;
  for (int i = 0; i < argc; ++i) {
    if ((std::strcmp(argv[i], "--backend") == 0 || std::strcmp(argv[i], "--threads") == 0) && i + 1 < argc) {
      ++i;
      continue;
    }
    catch_args.push_back(argv[i]);
  }
  try {
    dpt::library_test::g_context.emplace(dpt::init(argc, argv));
    Catch::Session session;
    if (int rc = session.applyCommandLine(int(catch_args.size()), catch_args.data())) return rc;
    float failed = session.run() ? 1.0f : 0.0f;
    dpt::Context& ctx = dpt::library_test::context();
    ctx.allreduce({&failed, 1}, dpt::Reduce::max);
    ctx.barrier();
    return failed > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "library test: " << e.what() << std::endl;
    return 1;
  }
}
