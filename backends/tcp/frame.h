#pragma once
// Wire format of the tcp backend.
//
// Terms:
//   connection - one TCP socket between two ranks of a mesh, used in both directions.
//   hello      - the first 64 bytes each side sends on a new connection: magic "DPTH",
//                version, kind (hello from the connecting rank, ack from the accepting
//                one), rank, world size, job id, communicator id and a fresh random
//                nonce. A connection whose hello does not match this job is closed
//                before it touches any state.
//   proof      - 32 bytes, HMAC-SHA256 over the job token (comm/store/job_token.h) of a role
//                label and the transcript hello || ack. The handshake:
//                  connecting rank -> hello
//                  accepting rank  -> ack, proof("dpt-mesh-ack")
//                  connecting rank -> proof("dpt-mesh-hello")
//                Each side checks the other's proof before it uses the connection; the
//                accepting rank registers the peer only after the last step.
//   frame      - every later message: a 24-byte header, then `length` payload bytes.
//   header     - magic "DPTF", version, type, tag (int64, passed through unchanged),
//                length (uint64). Decoded by decode_header(), which validates every
//                field against limits before the receiver acts on it.
//   types      - data (a tagged message), goodbye (the sender has shut its
//                communicator down cleanly; it sends nothing more), abort (the sender's
//                communicator failed; payload is the reason, at most kMaxAbortReason).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace dpt::tcp {

inline constexpr uint32_t kFrameMagic = 0x46545044;  // "DPTF" little-endian
inline constexpr uint32_t kHelloMagic = 0x48545044;  // "DPTH"
// A liveness probe (liveness_probe.h): 4 bytes, then the prober closes. The listener
// drops it without a warning (it is not a stray client).
inline constexpr uint32_t kProbeMagic = 0x50545044;  // "DPTP"
inline constexpr uint16_t kProtocolVersion = 2;  // 2: hello carries a nonce, proofs follow
inline constexpr size_t kHeaderBytes = 24;
inline constexpr size_t kHelloBytes = 64;
inline constexpr size_t kProofBytes = 32;
inline constexpr const char* kAckProofLabel = "dpt-mesh-ack";
inline constexpr const char* kHelloProofLabel = "dpt-mesh-hello";
inline constexpr uint64_t kMaxAbortReason = 4096;

enum class FrameType : uint16_t { data = 1, goodbye = 2, abort = 3 };

struct FrameHeader {
  FrameType type = FrameType::data;
  int64_t tag = 0;
  uint64_t length = 0;
};

// A header or hello that fails validation; the text says which field and why.
class FrameError : public std::runtime_error { using std::runtime_error::runtime_error; };

void encode_header(const FrameHeader& h, unsigned char out[kHeaderBytes]);
// Throws FrameError for a wrong magic/version/type or a length above `max_length`
// (data) or kMaxAbortReason (abort), or a non-empty goodbye.
FrameHeader decode_header(const unsigned char in[kHeaderBytes], uint64_t max_length);

enum class HelloKind : uint16_t { hello = 1, ack = 2 };

struct Hello {
  HelloKind kind = HelloKind::hello;
  int32_t rank = -1;
  int32_t world = -1;
  uint64_t job_id = 0;
  uint64_t comm_id = 0;  // which communicator of this job (several may meet in one store)
  unsigned char nonce[32] = {};
};

void encode_hello(const Hello& h, unsigned char out[kHelloBytes]);
// Throws FrameError for a wrong magic, version or kind (does not check rank/job: the
// caller compares those against what it expects).
Hello decode_hello(const unsigned char in[kHelloBytes]);

}  // namespace dpt::tcp
