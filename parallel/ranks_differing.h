#pragma once
// Which ranks hold another value than rank `root`: one allgather of a 64-bit digest each
// (a checksum of parameters, a hash of a model's structure). The ranks by number, as
// "1, 3"; "" when every rank agrees.
#include <cstdint>
#include <string>

#include "comm/communicator.h"

namespace dpt {

std::string ranks_differing(Communicator& comm, uint64_t mine, int root = 0);

}  // namespace dpt
