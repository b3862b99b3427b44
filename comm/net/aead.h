#pragma once
// Authenticated encryption of one direction of a connection, on OpenSSL's libcrypto.
//
// Terms:
//   cipher     - AES-256-GCM where the CPU has AES and carry-less multiply instructions
//                (every x86 CPU of the last decade: about 4-10 GB/s a core), else
//                ChaCha20-Poly1305 (fast in plain vector code). COMM_TCP_CIPHER names one
//                ("aes-256-gcm", "chacha20-poly1305") to override.
//   key        - 32 bytes per connection and direction, derived with HKDF-SHA256 from the
//                job token (input key material), the handshake transcript with both
//                sides' fresh nonces (salt) and a label naming the direction (info), so no
//                two connections or directions share a key even though the token is one.
//   record     - the unit sealed at once: at most kMaxRecordPlain plaintext bytes, its
//                16-byte tag, and a sequence number that is the nonce (never sent): a
//                replayed, dropped, reordered or re-ordered record opens with the wrong
//                nonce and fails its check, as does any flipped bit.
//   encrypt    - false: authenticate only. The bytes go in clear and are covered by the
//                tag as additional data (GMAC / Poly1305), so tampering is still caught.
#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dpt::crypto {

inline constexpr size_t kAeadKeyBytes = 32;
inline constexpr size_t kAeadTagBytes = 16;

enum class Cipher : uint8_t { aes256_gcm = 1, chacha20_poly1305 = 2 };

// The cipher this CPU runs fastest (or COMM_TCP_CIPHER's; throws std::invalid_argument
// naming the variable for another value).
Cipher preferred_cipher();
const char* cipher_name(Cipher c);
// Both ends compute the same choice from both preferences: AES-GCM only if both run it
// fast, since ChaCha20 is fast everywhere.
inline Cipher agree_cipher(Cipher a, Cipher b) { return a == b ? a : Cipher::chacha20_poly1305; }

struct DirectionKey {
  std::array<unsigned char, kAeadKeyBytes> key{};
  std::array<unsigned char, 4> nonce_prefix{};  // fixed part of the 12-byte nonce
};

// HKDF-SHA256(ikm = secret, salt = transcript, info = label) -> key and nonce prefix.
DirectionKey derive_direction_key(std::string_view secret, std::string_view transcript, std::string_view label);

// A record that failed its check: tampered, replayed, reordered or from another key.
class AuthFailure : public std::runtime_error { using std::runtime_error::runtime_error; };

// One direction's sealing (sender) or opening (receiver) state: the cipher context with
// its key set once, and the next record's sequence number.
class AeadDirection {
 public:
  AeadDirection(Cipher cipher, const DirectionKey& key, bool encrypt, bool sealing);
  ~AeadDirection();
  AeadDirection(const AeadDirection&) = delete;
  AeadDirection& operator=(const AeadDirection&) = delete;

  // Seals the concatenation of `parts` (`total` bytes) as the next record: `out` gets the
  // ciphertext (or the plaintext itself when not encrypting), `tag` the tag. `aad` is
  // covered by the tag and sent by the caller (the record's length header).
  void seal(std::string_view aad, const iovec* parts, int n_parts, size_t total, unsigned char* out,
            unsigned char tag[kAeadTagBytes]);
  // Opens the next record: `out` gets the plaintext. Throws AuthFailure (the text says
  // which record) when the tag does not match: when encrypting, `out` then holds bytes
  // to be discarded; when only authenticating, `out` is untouched (checked, then copied).
  void open(std::string_view aad, const unsigned char* in, size_t n, unsigned char* out,
            const unsigned char tag[kAeadTagBytes]);

  uint64_t sequence() const { return seq_; }
  bool encrypting() const { return encrypt_; }
  Cipher cipher() const { return cipher_; }

 private:
  void start_record();
  struct Ctx;
  Ctx* ctx_;
  Cipher cipher_;
  DirectionKey key_;
  bool encrypt_;
  bool sealing_;
  uint64_t seq_ = 0;
};

}  // namespace dpt::crypto
