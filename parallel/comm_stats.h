#pragma once
// What a step's communication cost: time spent in it, the part of it nobody overlapped
// (the step waited), and the bytes handed to the communicator.
#include <cstdint>

namespace dpt {

struct CommStats {
  double comm_s = 0;
  double exposed_s = 0;
  int64_t bytes = 0;
};

}  // namespace dpt
