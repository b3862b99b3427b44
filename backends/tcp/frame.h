#pragma once
// Wire format of the tcp backend.
//
// Terms:
//   connection - one TCP socket between two ranks of a mesh, used in both directions.
//   hello      - the first 72 bytes each side sends on a new connection: magic "DPTH",
//                version, kind (hello from the connecting rank, ack from the accepting
//                one), rank, world size, job id, communicator id, a fresh random nonce,
//                whether this side wants the records encrypted and the cipher it runs
//                fastest. A connection whose hello does not match this job is closed
//                before it touches any state.
//   proof      - 32 bytes, HMAC-SHA256 over the job token (comm/store/job_token.h) of a role
//                label and the transcript hello || ack. The handshake:
//                  connecting rank -> hello
//                  accepting rank  -> ack, proof("dpt-mesh-ack")
//                  connecting rank -> proof("dpt-mesh-hello")
//                Each side checks the other's proof before it uses the connection; the
//                accepting rank registers the peer only after the last step.
//   records    - after the handshake a connection that is not a shared-memory peer's
//                doorbell carries records (comm/net/record_stream.h): keys per direction
//                from HKDF(token, hello || ack, kDialKeyLabel / kAcceptKeyLabel),
//                encrypted when either side asked (secure_session.h says when), else
//                authenticated only; cipher by agree_cipher() of both preferences. The
//                proofs cover both hellos, so a relay cannot turn encryption off.
//   frame      - every later message (inside the records): a 24-byte header, then `length` payload bytes.
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
inline constexpr uint16_t kProtocolVersion = 3;  // 3: records; hello says encrypt and cipher
inline constexpr size_t kHeaderBytes = 24;
inline constexpr size_t kHelloBytes = 72;
inline constexpr size_t kProofBytes = 32;
inline constexpr const char* kAckProofLabel = "dpt-mesh-ack";
inline constexpr const char* kHelloProofLabel = "dpt-mesh-hello";
inline constexpr const char* kDialKeyLabel = "dpt-mesh-key dialing->accepting";
inline constexpr const char* kAcceptKeyLabel = "dpt-mesh-key accepting->dialing";
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
  bool encrypt = true;     // this side wants the records encrypted
  uint8_t cipher = 1;      // crypto::Cipher this side runs fastest
};

void encode_hello(const Hello& h, unsigned char out[kHelloBytes]);
// Throws FrameError for a wrong magic, version or kind (does not check rank/job: the
// caller compares those against what it expects).
Hello decode_hello(const unsigned char in[kHelloBytes]);

}  // namespace dpt::tcp
