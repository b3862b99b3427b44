#include "backends/tcp/shm_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "comm/launch/host_identity.h"
#include "comm/net/log.h"

namespace dpt::tcp {
namespace {

constexpr uint64_t kSegmentMagic = 0x314d485354504444ull;  // "DDPTSHM1"
constexpr size_t kPage = 4096;

struct SegmentHeader {
  uint64_t magic;
  uint64_t nonce;
  uint64_t ring_bytes;
};

// Layout: header page, two control pages, then ring 0 data, ring 1 data.
size_t segment_bytes(uint64_t ring) { return 3 * kPage + 2 * size_t(ring); }
RingControl* control(void* base, int which) {
  return reinterpret_cast<RingControl*>(static_cast<char*>(base) + kPage * size_t(1 + which));
}
char* ring_data(void* base, uint64_t ring, int which) {
  return static_cast<char*>(base) + 3 * kPage + size_t(which) * size_t(ring);
}

uint64_t random_u64() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

std::string key(const ShmConfig& c, const std::string& what, int i, int j = -1) {
  return c.prefix + "/shm/" + what + "/" + std::to_string(i) + (j >= 0 ? "/" + std::to_string(j) : "");
}

// A segment this rank created or opened, unmapped/unlinked unless released.
struct Mapping {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  std::string name;   // non-empty while this rank still has to unlink it
  ~Mapping() {
    if (!name.empty()) ::shm_unlink(name.c_str());
    if (base != MAP_FAILED) ::munmap(base, bytes);
  }
  ShmChannelPtr release(bool lower) {
    auto ch = std::make_unique<ShmChannel>(base, bytes, lower);
    base = MAP_FAILED;
    return ch;
  }
};

// Creates and initialises the segment of pair (rank, peer); throws std::runtime_error.
void create_segment(Mapping& m, const std::string& name, uint64_t ring, uint64_t nonce) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error("shm_open(" + name + "): " + std::strerror(errno));
  m.name = name;
  m.bytes = segment_bytes(ring);
  // posix_fallocate, not just ftruncate: tmpfs then reserves the pages now, so a full
  // /dev/shm (64 MiB in a default container) is an error here, not a SIGBUS later.
  int rc = ::posix_fallocate(fd, 0, off_t(m.bytes));
  int err = rc;
  if (rc == 0) {
    m.base = ::mmap(nullptr, m.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    err = errno;
  }
  ::close(fd);
  if (rc != 0 || m.base == MAP_FAILED)
    throw std::runtime_error("mapping " + name + ": " + std::strerror(err) + (rc != 0 ? " (is /dev/shm full or too small?)" : ""));
  new (control(m.base, 0)) RingControl();
  new (control(m.base, 1)) RingControl();
  auto* h = static_cast<SegmentHeader*>(m.base);
  h->ring_bytes = ring;
  h->nonce = nonce;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegmentMagic;
}

void open_segment(Mapping& m, const std::string& name, uint64_t ring, uint64_t nonce) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error("shm_open(" + name + "): " + std::strerror(errno));
  // Unlinked as soon as both sides hold it: from here on nothing can leak.
  ::shm_unlink(name.c_str());
  m.bytes = segment_bytes(ring);
  m.base = ::mmap(nullptr, m.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (m.base == MAP_FAILED) throw std::runtime_error("mmap(" + name + "): " + std::strerror(err));
  const auto* h = static_cast<const SegmentHeader*>(m.base);
  if (h->magic != kSegmentMagic || h->nonce != nonce || h->ring_bytes != ring)
    throw std::runtime_error(name + " is not the segment its creator announced (another /dev/shm?)");
}

}  // namespace

ShmChannel::ShmChannel(void* base, size_t bytes, bool lower) : base_(base), bytes_(bytes) {
  const uint64_t ring = static_cast<SegmentHeader*>(base)->ring_bytes;
  const int out = lower ? 0 : 1, in = 1 - out;
  out_ = ShmRing(control(base, out), ring_data(base, ring, out), ring);
  in_ = ShmRing(control(base, in), ring_data(base, ring, in), ring);
}

ShmChannel::~ShmChannel() { ::munmap(base_, bytes_); }

std::vector<ShmChannelPtr> setup_shm_channels(Store& store, const ShmConfig& c) {
  const int n = c.world, r = c.rank;
  std::vector<ShmChannelPtr> channels(static_cast<size_t>(n));
  if (n == 1) return channels;
  const std::string mine = c.enabled ? local_host_id() : "off";
  store.set(key(c, "host", r), mine);
  std::vector<bool> same(size_t(n), false);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    same[size_t(p)] = mine != "off" && store.get(key(c, "host", p), c.timeout) == mine;
  }
  // 1. Create the segments this rank owns (peers above it).
  std::vector<Mapping> created(static_cast<size_t>(n));
  for (int p = r + 1; p < n; ++p) {
    if (!same[size_t(p)]) continue;
    const std::string name = fmt::format("/dpt-{:016x}-{}-{}-{}", c.job_id, c.comm_id, r, p);
    const uint64_t nonce = random_u64();
    try {
      create_segment(created[size_t(p)], name, c.ring_bytes, nonce);
      store.set(key(c, "seg", r, p), name + " " + std::to_string(nonce));
    } catch (const std::exception& e) {
      log::warn("tcp: no shared memory with rank {} ({}); using TCP", p, e.what());
      store.set(key(c, "seg", r, p), "fail");
    }
  }
  // 2. Open the lower ranks' segments.
  for (int p = 0; p < r; ++p) {
    if (!same[size_t(p)]) continue;
    std::string v = store.get(key(c, "seg", p, r), c.timeout);
    bool ok = false;
    if (v != "fail") {
      Mapping m;
      try {
        auto sp = v.rfind(' ');
        open_segment(m, v.substr(0, sp), c.ring_bytes, std::stoull(v.substr(sp + 1)));
        channels[size_t(p)] = m.release(false);
        ok = true;
      } catch (const std::exception& e) {
        log::warn("tcp: cannot map the shared memory of rank {} ({}); using TCP", p, e.what());
      }
    }
    store.set(key(c, "ok", p, r), ok ? "1" : "0");
  }
  // 3. The verdicts on this rank's segments.
  for (int p = r + 1; p < n; ++p) {
    Mapping& m = created[size_t(p)];
    if (m.base == MAP_FAILED) continue;
    bool ok = store.get(key(c, "ok", r, p), c.timeout) == "1";
    m.name.clear();  // the peer unlinked it (or, on "0", the destructor below does)
    if (!ok) {
      ::shm_unlink(fmt::format("/dpt-{:016x}-{}-{}-{}", c.job_id, c.comm_id, r, p).c_str());
      continue;
    }
    channels[size_t(p)] = m.release(true);
  }
  return channels;
}

}  // namespace dpt::tcp
