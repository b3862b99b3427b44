#pragma once
// How a backend registers with the registry (registry.h): its name and how it is made.
// Each backend's folder defines one Registration in its register.cpp, returned by
// `<name>_registration()`. registry.cpp knows no backend by name: it only walks the list.
//
// The list: backends/CMakeLists.txt names every backend the project knows, in order, with
// whether this build has it and, if not, why; from that it generates backend_list.cpp,
// which calls the registration function of each backend built here and records the
// reason for each one that is not ("nccl": "needs CUDA").
//
// Why a generated list and not self-registering static objects (a registrar in each
// register.cpp whose constructor adds the backend to a global table): nothing would
// refer to such an object, and a linker keeps only what is referred to. From a static
// library (BUILD_SHARED_LIBS=OFF) it takes an object file only to resolve an undefined
// symbol, so register.o would be left out and the backend silently missing at run time;
// with shared libraries, --as-needed (the default on several distributions) drops a
// library nobody calls, with the same result. Working around that needs --whole-archive
// or -Wl,--no-as-needed in every program and in every project that links the installed
// package. The generated list calls each registration function by name, so the linker
// keeps exactly the backends of this build under any linking, and the order (known(),
// and the preference of "auto") is written in one place rather than left to the order of
// static initialization across libraries.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "comm/communicator.h"
#include "comm/launch/launch_env.h"

namespace dpt::backends {

struct Registration {
  const char* name = nullptr;
  // What describe() says after "<name>: " ("built (...)"); may look at the machine (nccl
  // counts devices).
  std::string (*status)() = nullptr;
  // Whether "auto" takes this backend under this launch. The list is asked in its order
  // and the first yes wins; null: never (nccl needs device buffers, asked for by name).
  bool (*takes_auto)(const LaunchInfo& li) = nullptr;
  // The world communicator of a launched job (`li`: detect_launch()). `share` hands rank
  // 0's strings to every rank over the launcher's own channel (MPI's broadcast under
  // mpirun, from whichever backend offers launcher_share below), or is null.
  std::unique_ptr<Communicator> (*create_world)(const LaunchInfo& li, CommOptions options,
                                                const ShareFromRank0& share) = nullptr;
  // Optional (null: not offered). A communicator of a group whose framework did its own
  // rendezvous (create_in_store in registry.h).
  std::unique_ptr<Communicator> (*create_in_store)(const StoreGroup& group, CommOptions options) = nullptr;
  // Optional. Under this launch, a broadcast from rank 0 over the launcher's channel that
  // other backends' bootstraps may use before they have connections (mpi under an MPI
  // launcher); null where there is none.
  ShareFromRank0 (*launcher_share)(const LaunchInfo& li) = nullptr;
  // Optional. Ends the whole job after a fatal error so no rank waits forever (mpi:
  // MPI_Abort when MPI is initialized); called for every built backend by abort_job().
  void (*abort_job)(int exit_code) = nullptr;
};

// One known backend: its registration where this build has it, else why not.
struct Entry {
  const char* name;
  const Registration* registration;  // null: not built here
  const char* not_built_reason;      // set when registration is null
};

// Every known backend in the list's order (backend_list.cpp, generated).
const std::vector<Entry>& entries();

// A number every member of a group computes alike from the group's name (FNV-1a): the
// tcp backend's communicator id, the mpi backend's creation tag.
inline uint64_t group_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace dpt::backends
