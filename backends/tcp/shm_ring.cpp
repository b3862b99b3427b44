#include "backends/tcp/shm_ring.h"

#include <algorithm>
#include <cstring>

namespace dpt::tcp {

void ShmRing::copy_in(uint64_t pos, const char* src, size_t n) {
  const size_t at = size_t(pos % capacity_);
  const size_t first = std::min<size_t>(n, size_t(capacity_) - at);
  std::memcpy(data_ + at, src, first);
  if (first < n) std::memcpy(data_, src + first, n - first);
}

void ShmRing::copy_out(uint64_t pos, char* dst, size_t n) {
  const size_t at = size_t(pos % capacity_);
  const size_t first = std::min<size_t>(n, size_t(capacity_) - at);
  std::memcpy(dst, data_ + at, first);
  if (first < n) std::memcpy(dst + first, data_, n - first);
}

size_t ShmRing::write(const iovec* iov, int iovcnt) {
  uint64_t head = ctl_->head.load(std::memory_order_relaxed);
  if (capacity_ - (head - cached_tail_) == 0) cached_tail_ = ctl_->tail.load(std::memory_order_acquire);
  size_t written = 0;
  for (int i = 0; i < iovcnt; ++i) {
    const char* src = static_cast<const char*>(iov[i].iov_base);
    size_t left = iov[i].iov_len;
    while (left > 0) {
      uint64_t space = capacity_ - (head - cached_tail_);
      if (space < std::min<uint64_t>(left, kPublishBytes)) {
        cached_tail_ = ctl_->tail.load(std::memory_order_acquire);
        space = capacity_ - (head - cached_tail_);
        if (space == 0) return written;
      }
      size_t n = std::min<size_t>({left, size_t(space), kPublishBytes});
      copy_in(head, src, n);
      head += n;
      ctl_->head.store(head, std::memory_order_release);
      src += n;
      left -= n;
      written += n;
    }
  }
  return written;
}

bool ShmRing::full() {
  cached_tail_ = ctl_->tail.load(std::memory_order_acquire);
  return ctl_->head.load(std::memory_order_relaxed) - cached_tail_ == capacity_;
}

bool ShmRing::arm_producer_wait() {
  ctl_->producer_waiting.store(1, std::memory_order_seq_cst);
  cached_tail_ = ctl_->tail.load(std::memory_order_seq_cst);
  return ctl_->head.load(std::memory_order_relaxed) - cached_tail_ < capacity_;
}

bool ShmRing::consumer_needs_wake() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (ctl_->consumer_sleeping.load(std::memory_order_seq_cst) == 0) return false;
  return ctl_->consumer_sleeping.exchange(0, std::memory_order_seq_cst) != 0;
}

size_t ShmRing::read(void* dst, size_t n) {
  uint64_t tail = ctl_->tail.load(std::memory_order_relaxed);
  size_t got = 0;
  char* out = static_cast<char*>(dst);
  while (got < n) {
    if (cached_head_ == tail) {
      cached_head_ = ctl_->head.load(std::memory_order_acquire);
      if (cached_head_ == tail) break;
    }
    size_t m = std::min<size_t>({n - got, size_t(cached_head_ - tail), kPublishBytes});
    copy_out(tail, out + got, m);
    tail += m;
    got += m;
    ctl_->tail.store(tail, std::memory_order_release);
  }
  return got;
}

bool ShmRing::empty() {
  cached_head_ = ctl_->head.load(std::memory_order_acquire);
  return cached_head_ == ctl_->tail.load(std::memory_order_relaxed);
}

bool ShmRing::arm_consumer_sleep() {
  ctl_->consumer_sleeping.store(1, std::memory_order_seq_cst);
  cached_head_ = ctl_->head.load(std::memory_order_seq_cst);
  return cached_head_ != ctl_->tail.load(std::memory_order_relaxed);
}

bool ShmRing::producer_needs_wake() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (ctl_->producer_waiting.load(std::memory_order_seq_cst) == 0) return false;
  return ctl_->producer_waiting.exchange(0, std::memory_order_seq_cst) != 0;
}

}  // namespace dpt::tcp
