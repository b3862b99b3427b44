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
#include "comm/store/store.h"

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
// For a framework that did its own rendezvous and hands over a store every rank of the
// group reaches (PyTorch's process groups: bindings/torch). tcp meets in the store; mpi
// needs no store and checks that MPI's world agrees with the framework's ranks.
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
// Rank 0's string on every rank of the MPI world, or `value` itself when this build or
// this process has no MPI launcher (bindings/torch agrees on MASTER_PORT with it).
std::string share_over_mpi(const std::string& value);

// COMM_BACKEND or "auto".
std::string default_name();
// For programs after a fatal error: ends an MPI job so no rank waits forever (no-op
// when MPI is not in use).
void abort_job(int exit_code);

}  // namespace dpt::backends
