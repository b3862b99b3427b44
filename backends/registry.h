#pragma once
// Backends chosen at run time by name: create("mpi" | "tcp" | "nccl" | "auto").
//   auto: mpi when the process was started by an MPI launcher (mpirun/mpiexec/srun with
//   PMI) and the mpi backend is built; otherwise tcp. nccl is never picked by auto: it
//   needs device buffers, which the caller asks for explicitly.
// The name comes from --backend, else COMM_BACKEND, else "auto".
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace dpt::backends {

// Every name create() understands, built or not, in a fixed order.
const std::vector<std::string>& known();
// The subset built into this binary (always includes "tcp").
std::vector<std::string> available();
// Why a backend is or is not usable here (for --help and errors).
std::string describe(const std::string& name);
// Resolves "auto" as documented above; other names are returned unchanged.
std::string resolve(const std::string& name);
// Creates the backend's world communicator. An unknown name is std::invalid_argument
// listing the valid ones; a backend not built is NotBuiltError saying why.
std::unique_ptr<Communicator> create(const std::string& name, CommOptions options = CommOptions::from_env());
// COMM_BACKEND or "auto".
std::string default_name();
// For programs after a fatal error: ends an MPI job so no rank waits forever (no-op
// when MPI is not in use).
void abort_job(int exit_code);

}  // namespace dpt::backends
