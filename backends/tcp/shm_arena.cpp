#include "backends/tcp/shm_arena.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <random>

#include <fmt/format.h>

#include "comm/net/log.h"
#include "comm/net/shm_names.h"
#include "comm/store/store_gather.h"

namespace dpt::tcp {
namespace {

constexpr uint64_t kArenaMagic = 0x314e524154504444ull;  // "DDPTARN1"
constexpr size_t kPage = 4096;
constexpr auto kMaxSleep = std::chrono::milliseconds(20);

struct ArenaHeader {
  uint64_t magic;
  uint64_t nonce;
  uint64_t world;
  uint64_t slot_bytes;
};

// One per rank, in lines of their own (128 bytes: adjacent-line prefetchers pair lines).
struct alignas(128) RankControl {
  std::atomic<uint32_t> step{0};
  std::atomic<uint32_t> sleepers{0};
  // Fingerprints by round parity (ordered by the barrier's step store and loads).
  std::atomic<uint64_t> what[2] = {0, 0};
  std::atomic<uint64_t> count[2] = {0, 0};
  // Set once by the rank before it says ok, read by waiters (shm_arena.h, "state").
  std::atomic<uint32_t> state{0};
  int32_t pid = 0;
  uint64_t start_ticks = 0;
  uint64_t pid_namespace = 0;
};
static_assert(sizeof(RankControl) == 128, "one rank's control words share one 128-byte line");
static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == 4,
              "the step word must be a plain 32-bit futex word");

size_t control_bytes(int world) { return (size_t(world) * sizeof(RankControl) + kPage - 1) / kPage * kPage; }
size_t arena_bytes(int world, uint64_t slot) { return kPage + control_bytes(world) + 2 * size_t(world) * slot; }
RankControl* controls(void* base) { return reinterpret_cast<RankControl*>(static_cast<char*>(base) + kPage); }
char* data(void* base, int world) { return static_cast<char*>(base) + kPage + control_bytes(world); }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::milliseconds max) {
  timespec ts{0, long(std::chrono::duration_cast<std::chrono::nanoseconds>(max).count())};
  // Shared (not FUTEX_PRIVATE): the waker is another process. EAGAIN (value changed),
  // EINTR and ETIMEDOUT all just send the caller back to look at the word.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool reached(uint32_t value, uint32_t target) { return int32_t(value - target) >= 0; }

uint64_t random_u64() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

std::string key(const ArenaConfig& c, const std::string& what, int r = -1) {
  return c.prefix + "/arena/" + what + (r >= 0 ? "/" + std::to_string(r) : "");
}

// A mapping this rank made, unmapped (and unlinked while `name` is set) unless released.
struct Mapping {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  std::string name;
  ~Mapping() {
    if (!name.empty()) ::shm_unlink(name.c_str());
    if (base != MAP_FAILED) ::munmap(base, bytes);
  }
};

void map_object(Mapping& m, const std::string& name, bool create, size_t bytes) {
  int fd = ::shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error("shm_open(" + name + "): " + std::strerror(errno));
  if (create) m.name = name;
  m.bytes = bytes;
  // posix_fallocate, not just ftruncate: tmpfs then reserves the pages now, so a full
  // /dev/shm (64 MiB in a default container) is an error here, not a SIGBUS later.
  if (const int rc = create ? ::posix_fallocate(fd, 0, off_t(bytes)) : 0; rc != 0) {
    ::close(fd);
    throw std::runtime_error("reserving " + std::to_string(bytes) + " bytes for " + name + ": " + std::strerror(rc) +
                             " (is /dev/shm full or too small?)");
  }
  // MAP_POPULATE: the first collective should not pay the page faults.
  m.base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (m.base == MAP_FAILED) throw std::runtime_error("mapping " + name + ": " + std::strerror(err));
}

}  // namespace

ShmArena::ShmArena(void* base, size_t bytes, const ArenaConfig& cfg)
    : base_(base), bytes_(bytes), rank_(cfg.rank), world_(cfg.world), slot_bytes_(cfg.slot_bytes), spin_(cfg.spin) {}

ShmArena::~ShmArena() { ::munmap(base_, bytes_); }

char* ShmArena::slot(int owner) const {
  return data(base_, world_) + (size_t(owner) * 2 + (round_ & 1)) * slot_bytes_;
}

void ShmArena::publish(const Fingerprint& f) {
  RankControl& me = controls(base_)[rank_];
  me.what[round_ & 1].store(f.what, std::memory_order_relaxed);
  me.count[round_ & 1].store(f.count, std::memory_order_relaxed);
}

ShmArena::Fingerprint ShmArena::published(int owner) const {
  const RankControl& c = controls(base_)[owner];
  return Fingerprint{c.what[round_ & 1].load(std::memory_order_relaxed), c.count[round_ & 1].load(std::memory_order_relaxed)};
}

void ShmArena::set_state(RankState s) {
  std::atomic<uint32_t>& st = controls(base_)[rank_].state;
  uint32_t cur = st.load(std::memory_order_acquire);
  // failed is final: a rank that gave up and then shuts down stays failed to its peers.
  while (cur != uint32_t(RankState::failed) && !st.compare_exchange_weak(cur, uint32_t(s), std::memory_order_acq_rel)) {
  }
}

ShmArena::RankState ShmArena::state_of(int rank) const {
  return RankState(controls(base_)[rank].state.load(std::memory_order_acquire));
}

ProcessLife ShmArena::life_of(int rank) const {
  const RankControl& c = controls(base_)[rank];
  return process_life(ProcessIdentity{c.pid, c.start_ticks, c.pid_namespace});
}

int32_t ShmArena::pid_of(int rank) const { return controls(base_)[rank].pid; }

void ShmArena::barrier(const Check& check) {
  const uint32_t target = ++step_;
  RankControl& me = controls(base_)[rank_];
  // seq_cst store, then seq_cst load of sleepers: pairs with the waiter's increment of
  // sleepers followed by its load of step, so either it sees the new step or we see it.
  me.step.store(target, std::memory_order_seq_cst);
  if (me.sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&me.step);
  for (int j = 0; j < world_; ++j)
    if (j != rank_) wait_for(j, target, check);
}

void ShmArena::wait_for(int peer, uint32_t target, const Check& check) {
  RankControl& c = controls(base_)[peer];
  if (reached(c.step.load(std::memory_order_acquire), target)) return;
  // Runs the check; if it gives up, looks at the step once more: a peer may arrive, then
  // leave (goodbye) or die between our last look and the check, and it did arrive.
  auto checked_reached = [&] {
    try {
      check(peer);
    } catch (...) {
      if (reached(c.step.load(std::memory_order_acquire), target)) return true;
      throw;
    }
    return reached(c.step.load(std::memory_order_acquire), target);
  };
  const auto spin_end = std::chrono::steady_clock::now() + spin_;
  for (unsigned i = 1;; ++i) {
    if (reached(c.step.load(std::memory_order_acquire), target)) return;
    // Pause first (the peer is usually microseconds away), then give the core away:
    // with more ranks than cores the late rank may be waiting for this very core.
    if (i < 128) {
      cpu_relax();
      continue;
    }
    ::sched_yield();
    if (i % 64 == 0) {
      if (checked_reached()) return;
      if (std::chrono::steady_clock::now() >= spin_end) break;
    }
  }
  for (;;) {
    c.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t v = c.step.load(std::memory_order_seq_cst);
    if (!reached(v, target)) futex_wait(&c.step, v, kMaxSleep);
    c.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (checked_reached()) return;
  }
}

size_t shm_arena_bytes(int world, uint64_t slot_bytes) { return arena_bytes(world, slot_bytes); }

std::unique_ptr<ShmArena> setup_shm_arena(Store& store, const ArenaConfig& c) {
  if (c.world < 2) return nullptr;
  // Through one gathered key each (comm/store/store_gather.h): O(1) store requests per
  // rank, not one per rank.
  auto everyone_says_yes = [&](const std::string& what, bool mine) {
    const auto all = gather_through_store(store, key(c, what), c.world, c.rank, mine ? "1" : "0", c.timeout, c.ctx);
    return std::all_of(all.begin(), all.end(), [](const std::string& v) { return v == "1"; });
  };
  if (!everyone_says_yes("want", c.enabled) || !c.enabled) return nullptr;

  const size_t bytes = arena_bytes(c.world, c.slot_bytes);
  // Named after rank 0 (comm/net/shm_names.h): if it dies before unlinking, it is reclaimed.
  const std::string name = shm_object_name(fmt::format("{:016x}-{}-arena", c.job_id, c.comm_id));
  Mapping m;
  bool ok = false;
  if (c.rank == 0) {
    const uint64_t nonce = random_u64();
    try {
      map_object(m, name, true, bytes);
      for (int r = 0; r < c.world; ++r) new (&controls(m.base)[r]) RankControl();
      auto* h = static_cast<ArenaHeader*>(m.base);
      *h = ArenaHeader{0, nonce, uint64_t(c.world), c.slot_bytes};
      std::atomic_thread_fence(std::memory_order_release);
      h->magic = kArenaMagic;
      store.set(key(c, "seg"), name + " " + std::to_string(nonce));
      ok = true;
    } catch (const std::exception& e) {
      log::warn("tcp: no shared-memory collective arena ({}); collectives use messages", e.what());
      store.set(key(c, "seg"), "fail");
    }
  } else {
    std::string v = store.get(key(c, "seg"), c.timeout);
    if (v != "fail") {
      try {
        const auto sp = v.rfind(' ');
        map_object(m, v.substr(0, sp), false, bytes);
        const auto* h = static_cast<const ArenaHeader*>(m.base);
        if (h->magic != kArenaMagic || h->nonce != std::stoull(v.substr(sp + 1)) || h->world != uint64_t(c.world) ||
            h->slot_bytes != c.slot_bytes)
          throw std::runtime_error(v.substr(0, sp) + " is not the arena rank 0 announced (another /dev/shm, or "
                                   "ranks with different COMM_TCP_SHM_SLOT_BYTES?)");
        ok = true;
      } catch (const std::exception& e) {
        log::warn("tcp: cannot map the collective arena ({}); collectives use messages", e.what());
      }
    }
  }
  if (ok) {
    // Before ok: once every rank said ok, each one's identity is there for the waiters.
    RankControl& me = controls(m.base)[c.rank];
    const ProcessIdentity id = this_process();
    me.pid = id.pid;
    me.start_ticks = id.start_ticks;
    me.pid_namespace = id.pid_namespace;
  }
  // Every rank reads every verdict (rank 0's: whether it made the arena), so all decide
  // alike; rank 0 gathers them, so it has read every one when it unlinks the name.
  const bool all_ok = everyone_says_yes("ok", ok);
  if (c.rank == 0 && !m.name.empty()) {
    ::shm_unlink(name.c_str());  // everyone who will ever map it has (or gave up)
    m.name.clear();
  }
  if (!all_ok) return nullptr;
  auto arena = std::make_unique<ShmArena>(m.base, m.bytes, c);
  m.base = MAP_FAILED;
  return arena;
}

}  // namespace dpt::tcp
