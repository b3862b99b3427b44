// Fuzz target: the tcp backend's wire format (backends/tcp/frame.h) and the mesh
// handshake's proof check (comm/store/job_token.h), the code every byte a peer sends meets first.
//
// Terms:
//   input  - the fuzzer's bytes, read two ways: as a stream of frames from byte 0 (header,
//            `length` payload bytes, next header, ... as the progress engine reads them),
//            as the connecting rank reads a handshake: its own hello in bytes
//            [0, 72), the peer's ack in [72, 144) and the peer's proof in [144, 176),
//            and as a record stream (comm/net/record_stream.h) arriving on a connection.
//   token  - fuzz::kToken, fixed; the seeds carry proofs made with it.
// Checks, for every input:
//   - decode_header/decode_hello throw FrameError or return a value that
//     encode_header/encode_hello turn back into exactly the bytes decoded, and a header's
//     length is within its type's limit (data: the max_length given, goodbye: 0, abort:
//     kMaxAbortReason);
//   - check_handshake_proof accepts a proof exactly when it equals HMAC-SHA256(token,
//     label || hello || ack) computed here, and never under the other role's label or a
//     different token;
//   - a record reader fed the input hands out no byte (nobody without the key can make a
//     record that passes its check) and stops with AuthFailure or at the stream's end;
//   - no read past the input (ASan: libFuzzer's buffer is exactly the input), no undefined
//     behaviour (UBSan), no exception other than FrameError.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <sys/socket.h>
#include <unistd.h>

#include "backends/tcp/frame.h"
#include "comm/net/record_stream.h"
#include "comm/store/job_token.h"
#include "tests/fuzz/fuzz_check.h"

using namespace dpt;
using namespace dpt::tcp;

namespace {

// Decodes one header and checks its properties; false when it is rejected.
bool decode_and_check_header(const unsigned char* in, FrameHeader& h) {
  try {
    h = decode_header(in, fuzz::kMaxFrameBytes);
  } catch (const FrameError&) {
    return false;
  }
  unsigned char again[kHeaderBytes];
  encode_header(h, again);
  FUZZ_CHECK(std::memcmp(again, in, kHeaderBytes) == 0, "a decoded header re-encodes to the same 24 bytes");
  switch (h.type) {
    case FrameType::data: FUZZ_CHECK(h.length <= fuzz::kMaxFrameBytes, "data frame length within max_length"); break;
    case FrameType::goodbye: FUZZ_CHECK(h.length == 0, "goodbye frame has no payload"); break;
    case FrameType::abort: FUZZ_CHECK(h.length <= kMaxAbortReason, "abort reason within kMaxAbortReason"); break;
    default: FUZZ_CHECK(false, "decoded frame type is data, goodbye or abort");
  }
  return true;
}

// Frames back to back, as the receiver walks them; stops at the first rejected header
// (the receiver closes the connection there) or at a payload that is not all in.
void walk_frames(const unsigned char* data, size_t size) {
  size_t pos = 0;
  FrameHeader h;
  while (size - pos >= kHeaderBytes && decode_and_check_header(data + pos, h)) {
    pos += kHeaderBytes;
    if (h.length > size - pos) return;
    pos += h.length;
  }
}

bool decodes_as_hello(const unsigned char* in) {
  Hello h;
  try {
    h = decode_hello(in);
  } catch (const FrameError&) {
    return false;
  }
  FUZZ_CHECK(h.kind == HelloKind::hello || h.kind == HelloKind::ack, "decoded hello kind is hello or ack");
  unsigned char again[kHelloBytes];
  encode_hello(h, again);
  FUZZ_CHECK(std::memcmp(again, in, kHelloBytes) == 0, "a decoded hello re-encodes to the same bytes");
  return true;
}

void check_proof(const unsigned char* data) {
  const std::string_view transcript(reinterpret_cast<const char*>(data), 2 * kHelloBytes);
  const unsigned char* received = data + 2 * kHelloBytes;
  const std::string other_token = std::string(fuzz::kToken) + "x";
  bool accepted_as[2] = {};
  const char* labels[2] = {kAckProofLabel, kHelloProofLabel};
  for (int i = 0; i < 2; ++i) {
    const crypto::Mac want = handshake_proof(fuzz::kToken, labels[i], transcript);
    accepted_as[i] = check_handshake_proof(fuzz::kToken, labels[i], transcript, received);
    FUZZ_CHECK(accepted_as[i] == (std::memcmp(want.data(), received, kProofBytes) == 0),
               "a proof is accepted exactly when it equals HMAC(token, label || transcript)");
    FUZZ_CHECK(!accepted_as[i] || !check_handshake_proof(other_token, labels[i], transcript, received),
               "a proof is not accepted under a different token");
  }
  FUZZ_CHECK(!(accepted_as[0] && accepted_as[1]), "a proof is not accepted under both role labels");
}

void read_as_records(const uint8_t* data, size_t size) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return;
  // At most libFuzzer's input size (4096 by default): it fits the pair's buffer.
  const ssize_t w = ::write(sv[0], data, size);
  ::close(sv[0]);
  if (w == static_cast<ssize_t>(size)) {
    crypto::DirectionKey key;  // a fixed key the input cannot know a tag for
    net::RecordReader reader(size % 2 ? crypto::Cipher::aes256_gcm : crypto::Cipher::chacha20_poly1305, key,
                             size % 4 < 2);
    char out[8192];
    try {
      const ssize_t n = reader.read(sv[1], out, sizeof out);
      FUZZ_CHECK(n <= 0, "bytes without a valid tag were handed out as a record's");
    } catch (const crypto::AuthFailure&) {
    }
  }
  ::close(sv[1]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  walk_frames(data, size);
  read_as_records(data, size);
  if (size >= kHelloBytes) {
    const bool hello_ok = decodes_as_hello(data);
    const bool ack_ok = size >= 2 * kHelloBytes && decodes_as_hello(data + kHelloBytes);
    // The mesh checks the proof only after both hellos decoded.
    if (hello_ok && ack_ok && size >= 2 * kHelloBytes + kProofBytes) check_proof(data);
  }
  return 0;
}
