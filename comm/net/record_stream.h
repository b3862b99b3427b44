#pragma once
// A byte stream cut into authenticated (by default encrypted) records, on one socket:
// what the tcp backend's connections between hosts and the store's connections carry
// once their handshake has derived the keys (crypto::AeadDirection).
//
// Terms:
//   record  - u32 plaintext length (little-endian, at most kMaxRecordPlain), the
//             ciphertext (or plaintext when only authenticating), a 16-byte tag. The
//             length is the tag's additional data; the sequence number is the nonce.
//   session - what a handshake hands over: cipher, whether to encrypt, the two
//             directions' keys, and the connection's name for errors.
// The layer sits under the framing of its users: they write and read plaintext bytes as
// before, so a frame may span records and a record may hold several frames.
#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/net/aead.h"

namespace dpt::net {

inline constexpr size_t kMaxRecordPlain = 64 * 1024;
inline constexpr size_t kRecordHeaderBytes = 4;
inline constexpr size_t kRecordOverhead = kRecordHeaderBytes + crypto::kAeadTagBytes;

struct SecureSession {
  crypto::Cipher cipher = crypto::Cipher::aes256_gcm;
  bool encrypt = true;
  crypto::DirectionKey send_key, recv_key;
  std::string connection;  // "10.0.0.1:4000 -> 10.0.0.2:5000", for errors
};

class RecordWriter {
 public:
  RecordWriter(crypto::Cipher cipher, const crypto::DirectionKey& key, bool encrypt);
  // Seals up to `max_plain` bytes gathered from `iov` into records appended to the
  // pending ciphertext; returns the plaintext bytes taken (the caller's buffers are free
  // again once taken).
  size_t seal(const iovec* iov, int n, size_t max_plain);
  void seal(const void* data, size_t n);
  // Moves the pending ciphertext to the end of `dst` (a caller with its own output
  // buffer: the store server).
  void take(std::string& dst);
  bool idle() const { return pos_ == out_.size(); }
  size_t pending() const { return out_.size() - pos_; }
  // One non-blocking send of pending ciphertext: bytes sent, 0 when the socket is full,
  // -1 on another error (errno set).
  ssize_t write_to(int fd);
  // Sends everything pending, waiting with poll() until `deadline` (net::send_all's
  // errors, naming `what`).
  void write_all(int fd, std::chrono::steady_clock::time_point deadline, const std::string& what);

 private:
  crypto::AeadDirection aead_;
  std::vector<unsigned char> out_;
  size_t pos_ = 0;
};

class RecordReader {
 public:
  RecordReader(crypto::Cipher cipher, const crypto::DirectionKey& key, bool encrypt);
  // Up to `want` plaintext bytes into `dst`: what an opened record left first, else the
  // next record (opened in a buffer of ours: only checked bytes reach `dst`), receiving from `fd` without
  // blocking while no whole record is buffered. Returns the bytes (> 0), 0 at the end of
  // the stream, -1 with errno (EAGAIN: nothing more now). Throws crypto::AuthFailure
  // for a record that fails its check or a length above kMaxRecordPlain.
  ssize_t read(int fd, void* dst, size_t want);
  // Exactly `n` bytes, waiting with poll() until `deadline` (net::recv_all's errors).
  void read_all(int fd, void* dst, size_t n, std::chrono::steady_clock::time_point deadline, const std::string& what);
  // Plaintext (or a whole record) is buffered: read() returns data without the socket,
  // so a poll() on it may not say so.
  bool ready() const;
  // Part of a record has arrived (an end of stream now cuts a record).
  bool mid_record() const { return plain_pos_ == plain_.size() && in_end_ > in_begin_; }

 private:
  bool whole_record() const;
  ssize_t read_record(int fd, void* dst, size_t want);  // one record, or kEmptyRecord
  crypto::AeadDirection aead_;
  std::vector<unsigned char> in_;  // received ciphertext, [in_begin_, in_end_)
  size_t in_begin_ = 0, in_end_ = 0;
  std::vector<unsigned char> plain_;  // an opened record's rest
  size_t plain_pos_ = 0;
};

// Both directions of one connection.
struct RecordChannel {
  RecordChannel(const SecureSession& s)
      : writer(s.cipher, s.send_key, s.encrypt), reader(s.cipher, s.recv_key, s.encrypt), connection(s.connection) {}
  RecordWriter writer;
  RecordReader reader;
  std::string connection;
};

}  // namespace dpt::net
