#include "comm/net/hmac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace dpt::crypto {

namespace {
// OpenSSL frees its global state (locks, the random generator) from an atexit handler.
// Threads of ours may still use it while the process exits: the flight-request watcher
// (comm/dispatch/flight_request.cpp) reconnecting to a store that just closed crashed a
// libtorch program's rank at exit in RAND_bytes on freed locks. Initialised first, at load,
// with no atexit clean-up, OpenSSL's state lives until the process is gone.
const bool openssl_without_atexit = [] {
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
  return true;
}();
}  // namespace

Mac hmac_sha256(std::string_view key, std::string_view data) {
  Mac out{};
  unsigned int len = 0;
  // OpenSSL reads a null key pointer with length 0 as "no key"; give it a valid one.
  static const unsigned char kEmpty = 0;
  const void* k = key.empty() ? static_cast<const void*>(&kEmpty) : key.data();
  if (!HMAC(EVP_sha256(), k, static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), out.data(), &len) ||
      len != kMacBytes)
    throw std::runtime_error("HMAC-SHA256 failed in libcrypto");
  return out;
}

void random_bytes(void* out, size_t n) {
  if (RAND_bytes(static_cast<unsigned char*>(out), static_cast<int>(n)) != 1)
    throw std::runtime_error("the system's random number generator failed (RAND_bytes)");
}

Nonce random_nonce() {
  Nonce n{};
  random_bytes(n.data(), n.size());
  return n;
}

bool constant_time_equal(const void* a, const void* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

std::string to_hex(const void* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

}  // namespace dpt::crypto
