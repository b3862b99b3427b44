// broadcast_where_differs (parallel/parallel_strategy.h), what DiLoCo starts and re-forms
// with: ranks that already hold rank 0's parameters exchange checksums only (the model
// does not cross the links: bytes sent stay far below its size); one rank that differs
// makes it a broadcast, after which every rank holds rank 0's bytes.
#include <vector>

#include "parallel/parallel_strategy.h"
#include "tests/support/dist_test.h"

using namespace dpt;

TEST_CASE("the model moves only where a rank's differs", "[broadcast]") {
  Communicator& comm = test::world();
  if (comm.size() < 2) return;
  const size_t n = 1 << 20;  // 4 MiB of parameters
  std::vector<float> params(n);
  for (size_t i = 0; i < n; ++i) params[i] = float(i % 977) * 0.5f;
  const std::vector<float> root_values = params;

  uint64_t before = comm.traffic().bytes_sent;
  const bool moved_equal = broadcast_where_differs(comm, params, "test");
  const uint64_t sent_equal = comm.traffic().bytes_sent - before;
  REQUIRE(test::all_ok(!moved_equal, "ranks holding the same parameters broadcast them"));
  REQUIRE(test::all_ok(sent_equal < 1024, "equal parameters sent " + std::to_string(sent_equal) + " bytes"));
  REQUIRE(test::all_ok(params == root_values, "equal parameters changed"));

  if (comm.rank() == comm.size() - 1) params[n / 2] += 1.0f;  // one rank differs in one element
  before = comm.traffic().bytes_received;
  const bool moved = broadcast_where_differs(comm, params, "test");
  const uint64_t received = comm.traffic().bytes_received - before;
  REQUIRE(test::all_ok(moved, "a rank with different parameters did not make it a broadcast"));
  REQUIRE(test::all_ok(params == root_values, "after the broadcast this rank does not hold rank 0's parameters"));
  REQUIRE(test::all_ok(comm.rank() == 0 || received >= n * sizeof(float),
                       "the broadcast delivered " + std::to_string(received) + " bytes"));
}
