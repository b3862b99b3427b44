#pragma once
// A single-producer/single-consumer byte ring in shared memory: the data path of the
// tcp backend between two ranks on one host (their TCP connection, made when the pair
// first talks, is the liveness channel and the doorbell). Where the rings live: the
// receivers' inboxes (shm_channel.h).
//
// Terms:
//   head     - total bytes the producer has published (only it writes head).
//   tail     - total bytes the consumer has consumed (only it writes tail).
//              head - tail bytes are readable; capacity - (head - tail) writable.
//              Both grow forever (64-bit); position in the data is value % capacity.
//   publish  - the producer copies at most kPublishBytes, then stores head (release),
//              so the consumer copies one piece out while the next is copied in.
//   sleeping - a consumer about to block in poll() sets consumer_sleeping, then looks
//              at head once more; a producer that publishes and finds the flag set
//              clears it and writes one doorbell byte on the TCP connection. The
//              flag store and the head load are sequentially consistent on both
//              sides (Dekker), so a wake-up can never be lost. producer_waiting is the
//              same for a producer blocked on a full ring.
// The frames written into a ring are exactly the TCP stream's (frame.h), so the
// progress engine parses both with the same code.
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dpt::tcp {

struct alignas(64) RingControl {
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
  alignas(64) std::atomic<uint32_t> consumer_sleeping{0};
  alignas(64) std::atomic<uint32_t> producer_waiting{0};
  // The producer's goodbye on a ring it never wrote: set instead of a goodbye frame, so a
  // pair that never talked takes no ring page (shm_channel.h); read at the socket's end.
  alignas(64) std::atomic<uint32_t> goodbye{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory rings need lock-free 64-bit atomics");

// One direction of a segment, seen from one side. The caller knows whether it is the
// producer or the consumer and only calls that side's functions.
class ShmRing {
 public:
  static constexpr size_t kPublishBytes = 64 * 1024;

  ShmRing() = default;
  ShmRing(RingControl* ctl, char* data, uint64_t capacity) : ctl_(ctl), data_(data), capacity_(capacity) {}
  bool valid() const { return ctl_ != nullptr; }

  // ---- producer ----
  // Copies as much of the iovecs as fits; returns the bytes written (0: full).
  size_t write(const iovec* iov, int iovcnt);
  bool full();
  // Before blocking: set producer_waiting, then true if the ring has space after all.
  bool arm_producer_wait();
  // After publishing: true when the consumer was asleep (the caller rings its doorbell).
  bool consumer_needs_wake();
  // Bytes published so far (the ring's pages below produced() % capacity were written).
  uint64_t produced() const { return ctl_->head.load(std::memory_order_relaxed); }
  void say_goodbye() { ctl_->goodbye.store(1, std::memory_order_seq_cst); }

  // ---- consumer ----
  size_t read(void* dst, size_t n);
  bool empty();
  // Before blocking: set consumer_sleeping, then true if bytes arrived after all.
  bool arm_consumer_sleep();
  // After consuming: true when the producer waits for space (ring its doorbell).
  bool producer_needs_wake();
  bool goodbye_said() const { return ctl_->goodbye.load(std::memory_order_seq_cst) != 0; }
  void disarm() {
    ctl_->consumer_sleeping.store(0, std::memory_order_relaxed);
  }
  void disarm_producer() { ctl_->producer_waiting.store(0, std::memory_order_relaxed); }

 private:
  void copy_in(uint64_t pos, const char* src, size_t n);
  void copy_out(uint64_t pos, char* dst, size_t n);

  RingControl* ctl_ = nullptr;
  char* data_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t cached_tail_ = 0;  // producer: last tail seen (saves cache-line traffic)
  uint64_t cached_head_ = 0;  // consumer: last head seen
};

}  // namespace dpt::tcp
