// A small rank program for the process-level reliability tests (reliability_test.cpp,
// reliability_tests.cmake). It creates the world communicator from the environment
// exactly as train does (backends::create), then runs allreduces of `--count` floats
// and checks each result exactly.
//
//   reliability_helper [--backend B] [--iters N] [--count C] [--die-rank R --die-at I]
//                      [--rank-count-step K]
//
// --die-rank/--die-at: rank R kills itself with SIGKILL before iteration I.
// --rank-count-step K: rank r uses count C + r*K (a deliberate collective mismatch).
// Exit codes: 0 ok; 3 a CommError (its text on stderr); 4 wrong result; 2 bad usage.
// Errors also end an MPI job (abort_job), as train does, so no rank waits forever.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/registry.h"

using namespace dpt;

int main(int argc, char** argv) {
  std::string backend = "auto";
  long iters = 10, count = 1024, die_rank = -1, die_at = -1, step = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend") backend = next();
    else if (a == "--iters") iters = std::atol(next());
    else if (a == "--count") count = std::atol(next());
    else if (a == "--die-rank") die_rank = std::atol(next());
    else if (a == "--die-at") die_at = std::atol(next());
    else if (a == "--rank-count-step") step = std::atol(next());
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  int rank = -1;
  try {
    auto comm = backends::create(backend);
    rank = comm->rank();
    const size_t n = size_t(count + rank * step);
    std::vector<float> v(n);
    const auto t0 = std::chrono::steady_clock::now();
    for (long it = 0; it < iters; ++it) {
      if (rank == die_rank && it == die_at) ::raise(SIGKILL);
      for (size_t k = 0; k < n; ++k) v[k] = float(rank + 1);
      comm->allreduce(make_buffer(v.data(), v.size()), ReduceOp::sum);
      const float want = float(comm->size() * (comm->size() + 1) / 2);
      for (size_t k = 0; k < n; ++k)
        if (v[k] != want) {
          std::fprintf(stderr, "rank %d: wrong result %g at %zu (want %g)\n", rank, v[k], k, want);
          return 4;
        }
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::printf("rank %d: %ld allreduces of %ld floats ok, %.1f us each\n", rank, iters, count, iters ? us / iters : 0.0);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    backends::abort_job(3);
    return 3;
  }
}
