// Uses the installed headers and libraries: a single-process tcp communicator.
#include <dpt/backends/registry.h>

#include <cstdio>

int main() {
  auto comm = dpt::backends::create("tcp");
  float x = 21;
  comm->allreduce(dpt::make_buffer(&x, 1), dpt::ReduceOp::sum);
  comm->allreduce(dpt::make_buffer(&x, 1), dpt::ReduceOp::sum);
  std::printf("consumer: rank %d of %d, result %.0f\n", comm->rank(), comm->size(), x);
  return x == 21 ? 0 : 1;
}
