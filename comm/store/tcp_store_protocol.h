#pragma once
// The TCP store's wire protocol, shared by server and client.
//
// Terms:
//   message - one request (client -> server) or one reply (server -> client).
//   header  - 8 bytes in front of every message: u32 magic "DPTS", u32 body length.
//   body    - the command byte and its fields; strings are u32 length + bytes.
//   auth    - the handshake every connection completes before its first message
//             (comm/store/job_token.h defines token, transcript and proof):
//               client -> server  hello: u32 magic "DPTA" | u32 kAuthVersion | nonce[32]
//                                 | u8 encrypt | u8 cipher | u8 bootstrap | u8 0
//               server -> client  hello of the same form, its own nonce
//               client -> server  proof("dpt-store-client", client hello || server hello)
//               server -> client  proof("dpt-store-server", same transcript)
//             The client proves first: the server shows nothing computed from the token
//             to a client that has not, so a recorded exchange gives no offline test of
//             a guessed token to anyone who does not know it already.
//   bootstrap - a hello with bootstrap = 1 asks a Slurm job's store (one that
//             hand_out_token_by_munge() was called on) for the token as a munge
//             credential (comm/store/munge_secret.h): the reply is u32 length |
//             credential, and the server closes the connection. Nothing else is answered
//             on it; another store refuses the request.
//   records - after the proofs, every message both ways travels in records
//             (comm/net/record_stream.h): keys per direction from HKDF(token, transcript,
//             kClientKeyLabel / kServerKeyLabel), encrypted when either hello asked
//             (comm/net/secure_session.h), else authenticated only.
// The server checks the magic and the length bound as soon as the 8 header bytes are in,
// before buffering any body: an HTTP request, random bytes or a huge length closes that
// connection at once and changes no state. Framing and request decoding are pure
// functions in comm/tcp_store_request.h (fuzzed by tests/fuzz/fuzz_store).
//
// Requests (body):             Replies (body: u8 status, then):
//   set   key value              ok
//   get   u32 timeout_ms key     ok value            | timeout u32 n keys...
//   add   key i64 delta          ok i64 new_value    | error msg
//   wait  u32 timeout_ms u32 n keys...  ok           | timeout u32 n missing keys...
//   check u32 n keys...          ok u8 all_present
#include <cstdint>

namespace dpt::store_proto {

inline constexpr uint32_t kMagic = 0x53545044;  // "DPTS" little-endian
inline constexpr uint32_t kHeaderBytes = 8;
inline constexpr uint32_t kMaxKeyBytes = 4096;
inline constexpr uint32_t kMaxValueBytes = 16u << 20;
inline constexpr uint32_t kMaxKeys = 65536;
inline constexpr uint32_t kMaxBodyBytes = kMaxValueBytes + 2 * kMaxKeyBytes + 64;
// Keys a wait may name is bounded by kMaxKeys and by the body size together.

inline constexpr uint32_t kAuthMagic = 0x41545044;  // "DPTA"
inline constexpr uint32_t kAuthVersion = 2;  // 2: the client proves first; records follow
inline constexpr uint32_t kAuthHelloBytes = 8 + 32 + 4;  // magic, version, nonce, encrypt, cipher, 0
inline constexpr uint32_t kAuthProofBytes = 32;
inline constexpr uint32_t kMaxCredentialBytes = 64 * 1024;  // a munge credential's text
inline constexpr const char* kServerProofLabel = "dpt-store-server";
inline constexpr const char* kClientProofLabel = "dpt-store-client";
inline constexpr const char* kClientKeyLabel = "dpt-store-key client->server";
inline constexpr const char* kServerKeyLabel = "dpt-store-key server->client";

enum Cmd : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4, kCheck = 5 };
enum Status : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

}  // namespace dpt::store_proto
