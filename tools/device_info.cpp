// device_info: what this build and this machine offer for GPU work: the CUDA runtime and
// devices, whether the nccl backend is usable, and whether MPI would take device
// pointers. Exit code 0 when a usable GPU exists, 3 when none (scripts and tests use it).
#include <cstdio>
#include <string>

#include "backends/registry.h"
#include "device/runtime.h"

int main() {
  using namespace dpt;
  std::string why;
  const int n = device::count(&why);
  std::printf("cuda built : %s\n", device::cuda_built() ? "yes" : "no");
  std::printf("devices    : %s\n", device::describe().c_str());
  std::printf("%s\n", backends::describe("nccl").c_str());
  std::printf("mpi        : device buffers are staged through pinned host memory unless the MPI library is "
              "CUDA-aware (asked at run time with MPIX_Query_cuda_support)\n");
  return n > 0 && !device::emulated() ? 0 : 3;
}
