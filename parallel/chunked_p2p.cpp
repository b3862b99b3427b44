#include "parallel/chunked_p2p.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dpt {

namespace {
template <class Start>
std::vector<WorkPtr> chunked(size_t n, int64_t tag, Start start) {
  const size_t chunks = (n + kChunkFloats - 1) / kChunkFloats;
  if (tag < 0 || tag > Communicator::kMaxUserTag / kChunksPerTag - 1 || chunks > size_t(kChunksPerTag))
    throw std::invalid_argument("chunked transfer of " + std::to_string(n) + " floats under tag " + std::to_string(tag) +
                                ": tag or length out of range");
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < chunks; ++i) {
    const size_t b = i * kChunkFloats, e = std::min(n, b + kChunkFloats);
    works.push_back(start(b, e - b, tag * kChunksPerTag + int64_t(i)));
  }
  return works;
}
}  // namespace

std::vector<WorkPtr> isend_chunked(Communicator& comm, const float* data, size_t n, int peer, int64_t tag) {
  return chunked(n, tag, [&](size_t b, size_t len, int64_t t) {
    return comm.isend(Buffer{const_cast<float*>(data) + b, len, DType::f32, {}}, peer, t);
  });
}

std::vector<WorkPtr> irecv_chunked(Communicator& comm, float* data, size_t n, int peer, int64_t tag) {
  return chunked(n, tag, [&](size_t b, size_t len, int64_t t) {
    return comm.irecv(Buffer{data + b, len, DType::f32, {}}, peer, t);
  });
}

void wait_all(std::vector<WorkPtr>& works, Communicator& comm) {
  for (auto& w : works) w->wait(comm.timeout());
  works.clear();
}

}  // namespace dpt
