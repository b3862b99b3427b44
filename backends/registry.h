#pragma once
// Backends chosen at run time by name: create("mpi" | "tcp" | "nccl" | "auto").
// Each backend registers itself (registration.h: its folder's register.cpp says its name
// and how it is made); backends/CMakeLists.txt lists them in this order: mpi, tcp, nccl.
//   auto: the first backend of that list, built here, that takes it under this launch:
//   mpi when the process was started by an MPI launcher (mpirun/mpiexec/srun with PMI),
//   then tcp, which always does. nccl is never picked by auto: it needs device buffers,
//   which the caller asks for explicitly.
// The name comes from --backend, else COMM_BACKEND, else "auto".
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/store/store.h"

namespace dpt::backends {

// Every name create() understands, built or not, in the list's order, then "auto".
const std::vector<std::string>& known();
// The subset built into this binary (always includes "tcp").
std::vector<std::string> available();
// Why a backend is or is not usable here (for --help and errors).
std::string describe(const std::string& name);
// Resolves "auto" as documented above; other names are returned unchanged.
std::string resolve(const std::string& name);
// Creates the backend's world communicator. An unknown name is std::invalid_argument
// listing the valid ones and those known but not built here ("unknown backend 'x'; valid
// backends: mpi, tcp, auto; not built here: nccl (needs CUDA)"); a backend not built is
// NotBuiltError saying why and which are built.
std::unique_ptr<Communicator> create(const std::string& name, CommOptions options = CommOptions::from_env());
// For a framework that did its own rendezvous and hands over a store every rank of the
// group reaches (PyTorch's process groups: bindings/torch). Offered by the backends whose
// registration says so: tcp meets in the store; mpi needs no store and checks that MPI's
// world agrees with the framework's ranks. Any other name is a UsageError listing them.
struct StoreGroup {
  std::string backend = "tcp";   // "tcp" or "mpi"
  std::shared_ptr<Store> store;  // tcp: where the ranks meet
  int rank = 0;
  int size = 1;
  // The members as ranks of the framework's world, in group rank order; empty: the
  // group is the whole world.
  std::vector<int> world_ranks;
  std::string group_name;        // the same on every member, distinct per group
  std::string peer_hint = "127.0.0.1";  // tcp: chooses the interface to listen on
  std::string job_token;         // tcp: what every mesh connection proves
  Millis rendezvous_timeout{120000};
};
std::unique_ptr<Communicator> create_in_store(const StoreGroup& group, CommOptions options);
// Rank 0's string on every rank, over the launcher's channel (the MPI world under an MPI
// launcher, offered by the mpi backend's registration), or `value` itself when this build
// or this process has none (bindings/torch agrees on MASTER_PORT with it).
std::string share_over_mpi(const std::string& value);

// COMM_BACKEND or "auto".
std::string default_name();
// For programs after a fatal error: ends an MPI job so no rank waits forever (each built
// backend's abort hook; a no-op when MPI is not in use or its world is one process).
void abort_job(int exit_code);

}  // namespace dpt::backends
