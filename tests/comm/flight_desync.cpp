// Two ranks out of step on purpose: after a send/recv pair and one allreduce together, rank 0 calls another
// allreduce where rank 1 calls a broadcast (collective 1 is a desync). The collectives
// fail (mismatched messages, or the timeout), each rank writes its flight record, and
// tests/comm/flight_recorder.sh checks that tools/flight_report.py names the desync.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "backends/registry.h"

int main(int argc, char** argv) {
  std::string backend = "tcp";
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--backend") == 0) backend = argv[i + 1];
  try {
    auto comm = dpt::backends::create(backend);
    std::vector<float> a(100, 1.0f), b(30, 2.0f), m(5, 3.0f);
    // A point-to-point pair first (recorded posted, then completed), then one collective together.
    if (comm->rank() == 0) comm->send(dpt::make_buffer(m.data(), m.size()), 1, 7);
    else comm->recv(dpt::make_buffer(m.data(), m.size()), 0, 7);
    comm->allreduce(dpt::make_buffer(a.data(), a.size()), dpt::ReduceOp::sum);
    if (comm->rank() == 0) comm->allreduce(dpt::make_buffer(a.data(), a.size()), dpt::ReduceOp::sum);
    else comm->broadcast(dpt::make_buffer(b.data(), b.size()), 0);
    comm->barrier();
    std::printf("rank %d: the desync went unnoticed\n", comm->rank());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flight_desync: %s\n", e.what());
    return 1;
  }
}
