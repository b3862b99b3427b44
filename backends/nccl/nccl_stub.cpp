// Stub for builds without a NCCL backend: every entry point reports why.
#include "backends/nccl/nccl_backend.h"

namespace dpt {

#ifndef DPT_NCCL_STUB_REASON
#define DPT_NCCL_STUB_REASON "not built"
#endif

bool nccl_built() { return false; }

std::string nccl_status() { return "not built (" DPT_NCCL_STUB_REASON ")"; }

std::unique_ptr<Communicator> create_nccl_communicator(const NcclBootstrap&, CommOptions) {
  throw NotBuiltError("backend 'nccl' is " + nccl_status() + "; built backends: mpi, tcp");
}

}  // namespace dpt
