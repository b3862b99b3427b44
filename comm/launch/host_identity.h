#pragma once
// Which machine a process runs on, as the communicators see it.
//   host id - "<hostname>|<boot id>|<network namespace>" (e.g. "net:[4026531840]").
//             Network namespaces on one machine share the hostname and boot id yet
//             stand for separate hosts (containers, the emulated clusters of bench/ and
//             tests/), so the namespace is part of the identity. The tcp backend's
//             shared memory and every communicator's Topology (comm/launch/topology.h) use it.
#include <cstdint>
#include <string>

namespace dpt {

std::string local_host_id();
// A 64-bit digest of a host id (FNV-1a), what ranks exchange to find their host groups.
uint64_t host_id_digest(const std::string& id);

}  // namespace dpt
