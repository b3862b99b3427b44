// The nccl backend's registration (backends/registration.h), where CUDA and NCCL were
// found; elsewhere backend_list.cpp records why it is not built. Never taken by "auto".
#include "backends/nccl/nccl_backend.h"
#include "backends/registration.h"

namespace dpt::backends {

const Registration& nccl_registration() {
  static const Registration r{
      .name = "nccl",
      .status = nccl_status,
      .create_world = create_nccl_world,
  };
  return r;
}

}  // namespace dpt::backends
