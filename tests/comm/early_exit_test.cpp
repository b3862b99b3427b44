// A rank that leaves early: the last rank destroys its communicator and exits 0 while
// the others start an allreduce. The survivors must fail (not hang) with an error that
// names the op and, on the tcp backend, the departed rank; this program exits 0 only
// when that happened on every survivor within the limit given by --within-s.
#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "backends/registry.h"

int main(int argc, char** argv) {
  std::string backend = "tcp";
  double within_s = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0) backend = argv[++i];
    else if (std::strcmp(argv[i], "--within-s") == 0) within_s = std::stod(argv[++i]);
  }
  auto comm = dpt::backends::create(backend);
  const int n = comm->size(), r = comm->rank();
  if (n < 2) {
    std::cout << "early_exit: needs at least 2 ranks, nothing to check at 1" << std::endl;
    return 0;
  }
  comm->barrier();
  if (r == n - 1) {
    comm.reset();  // closes its connections: the others see the peer go away
    std::cout << "rank " << r << " leaving early" << std::endl;
    return 0;
  }
  std::vector<float> x(1 << 16, 1.0f);
  auto t0 = std::chrono::steady_clock::now();
  try {
    comm->allreduce(dpt::make_buffer(x.data(), x.size()), dpt::ReduceOp::sum);
    std::cout << "rank " << r << ": FAIL: allreduce succeeded without rank " << n - 1 << std::endl;
    return 1;
  } catch (const dpt::CommError& e) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string what = e.what();
    std::cout << "rank " << r << " got, after " << s << " s: " << what << std::endl;
    bool names_op = what.find("allreduce") != std::string::npos;
    bool in_time = s <= within_s;
    if (!names_op || !in_time) {
      std::cout << "rank " << r << ": FAIL: error " << (names_op ? "" : "does not name the op; ")
                << (in_time ? "" : "came too late") << std::endl;
      return 1;
    }
    comm.reset();
    return 0;
  }
}
