// Chunked point-to-point (parallel/chunked_p2p.h), as N ranks in a ring: each rank sends
// 2.5 chunks' worth of floats (160 MB) to the next and receives from the previous; the
// values must arrive whole and in place. Registered with COMM_MAX_FRAME_BYTES at one
// chunk (64 MiB), under which one unchunked message of that size is refused (checked
// here too, so the test fails if chunking stops splitting).
#include <numeric>

#include "parallel/chunked_p2p.h"
#include "tests/support/dist_test.h"

using namespace dpt;

TEST_CASE("arrays larger than one message travel in chunks", "[chunked]") {
  Communicator& comm = test::world();
  if (comm.size() < 2) return;
  const size_t n = kChunkFloats * 5 / 2 + 3;
  const int to = (comm.rank() + 1) % comm.size(), from = (comm.rank() + comm.size() - 1) % comm.size();
  std::vector<float> out(n), in(n, -1.0f);
  // Exact small integers: value = sender * 7 + element index mod 4099.
  for (size_t i = 0; i < n; ++i) out[i] = float(comm.rank() * 7 + int(i % 4099));
  std::vector<WorkPtr> works = irecv_chunked(comm, in.data(), n, from, 31);
  for (auto& w : isend_chunked(comm, out.data(), n, to, 31)) works.push_back(std::move(w));
  CHECK(works.size() == 6);  // 3 chunks each way
  wait_all(works, comm);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += in[i] != float(from * 7 + int(i % 4099));
  REQUIRE(test::all_ok(bad == 0, std::to_string(bad) + " floats arrived wrong"));
}

TEST_CASE("one message above the frame limit is refused (why chunks exist)", "[chunked]") {
  Communicator& comm = test::world();
  if (comm.size() < 2 || test::backend() != "tcp") return;
  std::vector<float> big(kChunkFloats + 1);
  CHECK_THROWS_WITH(comm.isend(Buffer{big.data(), big.size(), DType::f32, {}}, (comm.rank() + 1) % comm.size(), 32),
                    Catch::Contains("exceeds COMM_MAX_FRAME_BYTES"));
}
