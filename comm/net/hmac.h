#pragma once
// The few cryptographic primitives the connection handshakes need, on OpenSSL's
// libcrypto: HMAC-SHA256, random nonces, and a compare whose time does not depend on
// where two MACs differ (so an attacker cannot find a valid MAC byte by byte).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dpt::crypto {

inline constexpr size_t kMacBytes = 32;    // HMAC-SHA256 output
inline constexpr size_t kNonceBytes = 32;  // per side per handshake

using Mac = std::array<unsigned char, kMacBytes>;
using Nonce = std::array<unsigned char, kNonceBytes>;

// HMAC-SHA256(key, data). Throws std::runtime_error if libcrypto fails.
Mac hmac_sha256(std::string_view key, std::string_view data);
// Bytes from the OS's cryptographic generator. Throws std::runtime_error on failure.
void random_bytes(void* out, size_t n);
Nonce random_nonce();
// Equality in time independent of the contents.
bool constant_time_equal(const void* a, const void* b, size_t n);
// Lower-case hex, for test vectors and generated tokens.
std::string to_hex(const void* data, size_t n);

}  // namespace dpt::crypto
