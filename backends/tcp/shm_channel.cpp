#include "backends/tcp/shm_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "comm/launch/host_identity.h"
#include "comm/net/log.h"
#include "comm/net/shm_names.h"
#include "comm/store/rendezvous.h"
#include "comm/store/store_gather.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif

namespace dpt::tcp {

constexpr uint64_t kInboxMagic = 0x3258424e49504444ull;  // "DDPINBX2"
constexpr size_t kPage = 4096;

struct InboxHeader {
  uint64_t magic;
  uint64_t nonce;
  uint64_t owner;       // the owning rank
  uint64_t slots;       // local ranks
  uint64_t ring_bytes;  // every ring of this inbox
  // 1 + the first local rank whose communicator failed and that had no connection to
  // the owner to send its abort frame on (ShmChannel::tell_failed); 0: none.
  uint64_t failed_by;
};

// One mapped inbox: unmapped when its last channel goes, and unlinked on the way out
// while `name` is set (the creator, before every peer mapped it).
struct ShmSegment {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  std::string name;
  uint64_t slots = 0, ring = 0;
  ~ShmSegment() {
    unlink();
    if (base != MAP_FAILED) ::munmap(base, bytes);
  }
  void unlink() {
    if (!name.empty()) ::shm_unlink(name.c_str());
    name.clear();
  }
  static size_t control_bytes(uint64_t slots) { return (size_t(slots) * sizeof(RingControl) + kPage - 1) / kPage * kPage; }
  static size_t total_bytes(uint64_t slots, uint64_t ring) {
    return kPage + control_bytes(slots) + size_t(slots) * size_t(ring);
  }
  RingControl* control(int slot) const {
    return reinterpret_cast<RingControl*>(static_cast<char*>(base) + kPage) + slot;
  }
  char* ring_data(int slot) const {
    return static_cast<char*>(base) + kPage + control_bytes(slots) + size_t(slot) * size_t(ring);
  }
};

namespace {

uint64_t random_u64() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

// An exchange's key: per communicator, and per host (named by its lowest rank) where only
// a host's ranks take part.
std::string group_key(const ShmConfig& c, const std::string& what, int host_leader = -1) {
  return c.prefix + "/shm/" + what + (host_leader >= 0 ? "/h" + std::to_string(host_leader) : "");
}

std::string rank_text(const std::vector<int>& ranks) {
  return ranks.size() == 1 ? "rank " + std::to_string(ranks[0]) : "ranks " + format_rank_list(ranks);
}

// Makes this rank's inbox, with rings of at most `ring` bytes; throws std::runtime_error
// saying why not. `others` is what else the job will take from /dev/shm (the arena).
void create_inbox(ShmSegment& s, const std::string& name, int owner, uint64_t slots, uint64_t ring, uint64_t others,
                  uint64_t nonce) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error("shm_open(" + name + "): " + std::strerror(errno));
  s.name = name;
  s.slots = slots;
  const size_t reserved = kPage + ShmSegment::control_bytes(slots);
  std::string why;
  // The file is sparse: posix_fallocate reserves only the header and controls now (a
  // full /dev/shm is then an error here, not a SIGBUS later); the rings are reserved by
  // their senders as they write. So that those reservations cannot fail for want of
  // room this job took, the rings shrink until every local rank's inbox could fill up
  // (L(L-1) rings) in what /dev/shm has free beside the arena.
  if (const int rc = ::posix_fallocate(fd, 0, off_t(reserved)); rc != 0) {
    why = std::string("reserving its header: ") + std::strerror(rc) + " (is /dev/shm full or too small?)";
  } else if (struct statvfs v {}; ::fstatvfs(fd, &v) == 0) {
    const uint64_t free_bytes = uint64_t(v.f_bavail) * v.f_frsize, rings = slots * (slots - 1);
    const uint64_t budget = free_bytes >= others + rings * kPage ? free_bytes - others : free_bytes;
    while (rings * ring > budget && ring > kPage) ring /= 2;
    if (rings * ring > budget)
      why = fmt::format("{} local ranks need {} rings of at least {} bytes, /dev/shm has {} free (is /dev/shm full or "
                        "too small?)", slots, rings, kPage, free_bytes);
  }
  s.ring = ring;
  s.bytes = ShmSegment::total_bytes(slots, ring);
  if (!why.empty()) {
  } else if (::ftruncate(fd, off_t(s.bytes)) != 0) {
    why = std::string("ftruncate: ") + std::strerror(errno);
  } else if ((s.base = ::mmap(nullptr, s.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
    why = std::string("mmap: ") + std::strerror(errno);
  }
  ::close(fd);
  if (!why.empty()) throw std::runtime_error(name + ": " + why);
  for (uint64_t i = 0; i < slots; ++i) new (s.control(int(i))) RingControl();
  auto* h = static_cast<InboxHeader*>(s.base);
  *h = InboxHeader{0, nonce, uint64_t(owner), slots, ring, 0};
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kInboxMagic;
}

// Maps a peer's inbox (its owner unlinks it); throws std::runtime_error.
void open_inbox(ShmSegment& s, const std::string& name, int owner, uint64_t slots, uint64_t nonce) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error("shm_open(" + name + "): " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || size_t(st.st_size) < kPage) {
    ::close(fd);
    throw std::runtime_error(name + " has no header (another /dev/shm?)");
  }
  s.bytes = size_t(st.st_size);
  s.base = ::mmap(nullptr, s.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (s.base == MAP_FAILED) throw std::runtime_error("mmap(" + name + "): " + std::strerror(err));
  const auto* h = static_cast<const InboxHeader*>(s.base);
  if (h->magic != kInboxMagic || h->nonce != nonce || h->owner != uint64_t(owner) || h->slots != slots ||
      ShmSegment::total_bytes(h->slots, h->ring_bytes) != s.bytes)
    throw std::runtime_error(name + " is not the inbox its creator announced (another /dev/shm?)");
  s.slots = h->slots;
  s.ring = h->ring_bytes;
}

}  // namespace

uint64_t inbox_ring_bytes(uint64_t ring_bytes, uint64_t inbox_bytes, int local_ranks) {
  uint64_t ring = ring_bytes;
  if (local_ranks > 1) {
    const uint64_t share = inbox_bytes / uint64_t(local_ranks - 1);
    while (ring > share && ring > kPage) ring /= 2;
  }
  return ring;
}

ShmChannel::ShmChannel(std::shared_ptr<ShmSegment> mine, std::shared_ptr<ShmSegment> theirs, int my_slot, int peer_slot)
    : mine_(std::move(mine)), theirs_(std::move(theirs)) {
  in_ = ShmRing(mine_->control(peer_slot), mine_->ring_data(peer_slot), mine_->ring);
  out_data_ = theirs_->ring_data(my_slot);
  out_bytes_ = size_t(theirs_->ring);
  out_ = ShmRing(theirs_->control(my_slot), out_data_, theirs_->ring);
}

ShmChannel::~ShmChannel() = default;

void ShmChannel::tell_failed(int my_rank) {
  uint64_t none = 0;
  std::atomic_ref<uint64_t>(static_cast<InboxHeader*>(theirs_->base)->failed_by)
      .compare_exchange_strong(none, uint64_t(my_rank) + 1, std::memory_order_acq_rel);
}

int ShmChannel::failed_by() const {
  const uint64_t v =
      std::atomic_ref<uint64_t>(static_cast<InboxHeader*>(mine_->base)->failed_by).load(std::memory_order_acquire);
  return int(v) - 1;
}

std::string ShmChannel::reserve_more(size_t upcoming) {
  // Pages up to where the coming write can reach, rounded to pages: a pair that only
  // exchanges a few small frames takes a page per direction, not a ring.
  const uint64_t reach = std::min<uint64_t>(out_.produced() + upcoming, out_bytes_);
  const size_t end = std::min(out_bytes_, size_t((reach + kPage - 1) / kPage * kPage));
  if (end <= out_reserved_) return "";
  char* from = out_data_ + out_reserved_;
  const size_t len = end - out_reserved_;
  // MADV_POPULATE_WRITE allocates the pages in the peer's inbox now and says so when
  // /dev/shm is full, where a plain write would be killed by SIGBUS.
  if (::madvise(from, len, MADV_POPULATE_WRITE) != 0) {
    const int err = errno;
    if (err != EINVAL)
      return fmt::format("reserving {} bytes of it in /dev/shm: {} (is /dev/shm full? COMM_TCP_SHM_INBOX_BYTES bounds "
                         "each rank's rings, COMM_TCP_SHM=0 turns shared memory off)",
                         len, std::strerror(err));
    // Before Linux 5.14: touch the pages (no SIGBUS guard there).
    for (size_t at = 0; at < len; at += kPage) reinterpret_cast<volatile char*>(from)[at] = 0;
  }
  out_reserved_ = end;
  return "";
}

std::vector<ShmChannelPtr> setup_shm_channels(Store& store, const ShmConfig& c) {
  const int n = c.world, r = c.rank;
  std::vector<ShmChannelPtr> channels(static_cast<size_t>(n));
  if (n == 1) return channels;
  // Each exchange below goes through one gathered key (comm/store/store_gather.h): O(1)
  // store requests per rank (O(ranks) at the gatherer), where reading every peer's key
  // cost the store P(P-1) requests per exchange.
  const std::string mine = c.enabled ? local_host_id() : "off";
  const std::vector<std::string> hosts = gather_through_store(store, group_key(c, "host"), n, r, mine, c.timeout, c.ctx);
  std::vector<int> local;  // local ranks, this one included
  for (int p = 0; p < n; ++p)
    if (mine != "off" && hosts[size_t(p)] == mine) local.push_back(p);
  if (local.size() < 2) return channels;
  std::vector<int> slot_of(size_t(n), -1);
  for (size_t i = 0; i < local.size(); ++i) slot_of[size_t(local[i])] = int(i);

  // The lowest local rank removes what dead processes left in /dev/shm (an earlier job
  // killed before it unlinked its objects), so it cannot fill the host.
  if (local.front() == r) {
    const ShmReclaim gone = reclaim_dead_shm();
    if (!gone.removed.empty())
      log::warn("tcp: removed {} shared-memory object(s) ({} MiB) left in /dev/shm by dead processes", gone.removed.size(),
                gone.removed_bytes >> 20);
  }

  // 1. This rank's inbox.
  const uint64_t ring = inbox_ring_bytes(c.ring_bytes, c.inbox_bytes, int(local.size()));
  auto own = std::make_shared<ShmSegment>();
  const std::string name = shm_object_name(fmt::format("{:016x}-{}-inbox-{}", c.job_id, c.comm_id, r));
  bool have_own = false;
  std::string own_inbox = "fail";
  std::vector<int> peers;
  for (int p : local)
    if (p != r) peers.push_back(p);
  try {
    const uint64_t nonce = random_u64();
    const uint64_t others = int(local.size()) == n ? c.arena_bytes : 0;  // the arena, when all ranks are local
    create_inbox(*own, name, r, local.size(), ring, others, nonce);
    own_inbox = name + " " + std::to_string(nonce);
    have_own = true;
  } catch (const std::exception& e) {
    own->unlink();
    log::warn("tcp: no shared memory with {} ({}); using TCP", rank_text(peers), e.what());
  }
  // 2. Every local peer's inbox (the lowest local rank gathers them).
  const std::vector<std::string> inboxes =
      gather_through_store(store, group_key(c, "inbox", local.front()), local, r, own_inbox, c.timeout, c.ctx);
  std::vector<bool> mapped(size_t(n), false);
  std::vector<std::shared_ptr<ShmSegment>> theirs(static_cast<size_t>(n));
  for (int p : peers) {
    const std::string& v = inboxes[size_t(slot_of[size_t(p)])];
    if (v == "fail") continue;
    auto seg = std::make_shared<ShmSegment>();
    try {
      const auto sp = v.rfind(' ');
      open_inbox(*seg, v.substr(0, sp), p, local.size(), std::stoull(v.substr(sp + 1)));
      theirs[size_t(p)] = std::move(seg);
      mapped[size_t(p)] = true;
    } catch (const std::exception& e) {
      log::warn("tcp: cannot map the shared memory of rank {} ({}); using TCP", p, e.what());
    }
  }
  // Which peers' inboxes this rank could not map, as their ranks: normally none, so the
  // gathered key stays a few bytes per rank however many ranks the host has.
  std::string unmapped;
  for (int p : peers)
    if (!mapped[size_t(p)]) unmapped += (unmapped.empty() ? "" : " ") + std::to_string(p);
  const std::vector<std::string> misses =
      gather_through_store(store, group_key(c, "mapped", local.front()), local, r, unmapped, c.timeout, c.ctx);
  // 3. A pair whose ranks mapped each other's inbox uses it. Every peer has now tried
  //    this rank's inbox: nobody will open it again.
  const std::string me = std::to_string(r);
  for (int p : peers) {
    const std::string& miss = misses[size_t(slot_of[size_t(p)])];
    bool p_mapped_mine = true;
    for (size_t at = 0; at < miss.size();) {
      size_t end = miss.find(' ', at);
      if (end == std::string::npos) end = miss.size();
      if (miss.compare(at, end - at, me) == 0) p_mapped_mine = false;
      at = end + 1;
    }
    if (have_own && theirs[size_t(p)] && p_mapped_mine)
      channels[size_t(p)] = std::make_unique<ShmChannel>(own, theirs[size_t(p)], slot_of[size_t(r)], slot_of[size_t(p)]);
  }
  own->unlink();
  return channels;
}

}  // namespace dpt::tcp
