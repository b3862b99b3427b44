#include "comm/net/record_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "comm/net/socket.h"

namespace dpt::net {
namespace {

constexpr size_t kReceiveChunk = 256 * 1024;  // ciphertext taken from the kernel per recv()
constexpr ssize_t kEmptyRecord = -2;
constexpr size_t kMaxRecordWire = kMaxRecordPlain + kRecordOverhead;

uint32_t load_u32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void store_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::string_view as_view(const unsigned char* p, size_t n) { return {reinterpret_cast<const char*>(p), n}; }

}  // namespace

// =====================================================================================
// Writer

RecordWriter::RecordWriter(crypto::Cipher cipher, const crypto::DirectionKey& key, bool encrypt)
    : aead_(cipher, key, encrypt, /*sealing=*/true) {}

size_t RecordWriter::seal(const iovec* iov, int n, size_t max_plain) {
  if (pos_ == out_.size()) {
    out_.clear();
    pos_ = 0;
  }
  size_t taken = 0;
  int i = 0;
  size_t off = 0;  // into iov[i]
  while (taken < max_plain) {
    // Gather this record's pieces (at most kMaxRecordPlain bytes) without copying.
    iovec parts[64];
    int np = 0;
    size_t len = 0;
    const size_t cap = std::min(kMaxRecordPlain, max_plain - taken);
    while (i < n && len < cap && np < 64) {
      const size_t avail = iov[i].iov_len - off;
      const size_t take = std::min(avail, cap - len);
      if (take) parts[np++] = {static_cast<char*>(iov[i].iov_base) + off, take};
      len += take;
      off += take;
      if (off == iov[i].iov_len) {
        ++i;
        off = 0;
      }
    }
    if (len == 0) break;
    const size_t at = out_.size();
    out_.resize(at + kRecordOverhead + len);
    unsigned char* rec = out_.data() + at;
    store_u32(rec, static_cast<uint32_t>(len));
    aead_.seal(as_view(rec, kRecordHeaderBytes), parts, np, len, rec + kRecordHeaderBytes,
               rec + kRecordHeaderBytes + len);
    taken += len;
  }
  return taken;
}

void RecordWriter::seal(const void* data, size_t n) {
  iovec one{const_cast<void*>(data), n};
  seal(&one, 1, n);
}

void RecordWriter::take(std::string& dst) {
  dst.append(reinterpret_cast<const char*>(out_.data()) + pos_, out_.size() - pos_);
  out_.clear();
  pos_ = 0;
}

ssize_t RecordWriter::write_to(int fd) {
  for (;;) {
    const ssize_t w = ::send(fd, out_.data() + pos_, out_.size() - pos_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w >= 0) {
      pos_ += static_cast<size_t>(w);
      return w;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

void RecordWriter::write_all(int fd, std::chrono::steady_clock::time_point deadline, const std::string& what) {
  send_all(fd, out_.data() + pos_, out_.size() - pos_, deadline, what);
  out_.clear();
  pos_ = 0;
}

// =====================================================================================
// Reader

RecordReader::RecordReader(crypto::Cipher cipher, const crypto::DirectionKey& key, bool encrypt)
    : aead_(cipher, key, encrypt, /*sealing=*/false), in_(kReceiveChunk + kMaxRecordWire) {}

bool RecordReader::whole_record() const {
  const size_t have = in_end_ - in_begin_;
  if (have < kRecordHeaderBytes) return false;
  const size_t len = load_u32(in_.data() + in_begin_);
  return len > kMaxRecordPlain || have >= kRecordOverhead + len;  // an oversized length fails at once
}

bool RecordReader::ready() const { return plain_pos_ < plain_.size() || whole_record(); }

ssize_t RecordReader::read(int fd, void* dst, size_t want) {
  if (want == 0) return 0;
  if (plain_pos_ < plain_.size()) {
    const size_t n = std::min(want, plain_.size() - plain_pos_);
    std::memcpy(dst, plain_.data() + plain_pos_, n);
    plain_pos_ += n;
    return static_cast<ssize_t>(n);
  }
  for (;;) {
    const ssize_t got = read_record(fd, dst, want);
    if (got != kEmptyRecord) return got;
  }
}

ssize_t RecordReader::read_record(int fd, void* dst, size_t want) {
  while (!whole_record()) {
    // Room for one more chunk after what is buffered: slide the partial record down.
    if (in_.size() - in_end_ < kReceiveChunk / 2) {
      std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
      in_end_ -= in_begin_;
      in_begin_ = 0;
    }
    const ssize_t r = ::recv(fd, in_.data() + in_end_, in_.size() - in_end_, MSG_DONTWAIT);
    if (r > 0) {
      in_end_ += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    return r;  // 0: end of stream; -1: errno says
  }
  const unsigned char* rec = in_.data() + in_begin_;
  const size_t len = load_u32(rec);
  if (len > kMaxRecordPlain)
    throw crypto::AuthFailure("record " + std::to_string(aead_.sequence()) + " claims " + std::to_string(len) +
                              " bytes, above the limit of " + std::to_string(kMaxRecordPlain) +
                              ": the stream was changed or is not from this job");
  const unsigned char* body = rec + kRecordHeaderBytes;
  // Only checked bytes reach the caller (a receive into the model's parameters must not
  // see a tampered byte even when the operation then fails): an encrypted record is opened
  // into our own buffer and copied out; an authenticated-only one is checked in place and
  // then copied straight to the caller when it fits.
  const bool direct = !aead_.encrypting() && len <= want;
  if (!direct) {
    plain_.resize(len);
    plain_pos_ = 0;
  }
  try {
    aead_.open(as_view(rec, kRecordHeaderBytes), body, len, direct ? static_cast<unsigned char*>(dst) : plain_.data(),
               body + len);
  } catch (...) {
    plain_.clear();
    plain_pos_ = 0;
    throw;
  }
  in_begin_ += kRecordOverhead + len;
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  if (len == 0) return kEmptyRecord;  // never sealed by a writer; skipped, not an end of stream
  if (direct) return static_cast<ssize_t>(len);
  const size_t n = std::min(want, len);
  std::memcpy(dst, plain_.data(), n);
  plain_pos_ = n;
  return static_cast<ssize_t>(n);
}

void RecordReader::read_all(int fd, void* dst, size_t n, std::chrono::steady_clock::time_point deadline,
                            const std::string& what) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throw SocketClosed("connection closed by " + what);
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_fd(fd, POLLIN, deadline)) throw SocketTimeout("timed out receiving from " + what);
      continue;
    }
    if (errno == ECONNRESET) throw SocketClosed("connection reset by " + what, errno);
    throw SocketError("recv from " + what + ": " + errno_string(errno), errno);
  }
}

}  // namespace dpt::net
