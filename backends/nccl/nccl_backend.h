#pragma once
// The nccl backend's entry points. Until the NCCL backend is written (the GPU issue),
// and in builds without CUDA/NCCL, a stub answers "not built" with the reason, so
// callers need no #ifdef.
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace dpt {

bool nccl_built();
std::string nccl_status();
std::unique_ptr<Communicator> create_nccl_communicator(CommOptions options);

}  // namespace dpt
