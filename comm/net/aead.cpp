#include "comm/net/aead.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace dpt::crypto {
namespace {

[[noreturn]] void libcrypto_failed(const char* what) {
  throw std::runtime_error(std::string("libcrypto failed: ") + what);
}

const EVP_CIPHER* evp_cipher(Cipher c) {
  return c == Cipher::aes256_gcm ? EVP_aes_256_gcm() : EVP_chacha20_poly1305();
}

}  // namespace

Cipher preferred_cipher() {
  if (const char* v = std::getenv("COMM_TCP_CIPHER"); v && *v) {
    const std::string s(v);
    if (s == "aes-256-gcm") return Cipher::aes256_gcm;
    if (s == "chacha20-poly1305") return Cipher::chacha20_poly1305;
    throw std::invalid_argument("COMM_TCP_CIPHER='" + s + "': use aes-256-gcm or chacha20-poly1305");
  }
  // AES-GCM runs at several GB/s a core only with AES-NI and PCLMULQDQ; without them
  // OpenSSL's ChaCha20-Poly1305 is the faster one by far.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul")) return Cipher::aes256_gcm;
  return Cipher::chacha20_poly1305;
}

const char* cipher_name(Cipher c) { return c == Cipher::aes256_gcm ? "aes-256-gcm" : "chacha20-poly1305"; }

DirectionKey derive_direction_key(std::string_view secret, std::string_view transcript, std::string_view label) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (!kdf) libcrypto_failed("no HKDF");
  EVP_KDF_CTX* kctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (!kctx) libcrypto_failed("HKDF context");
  // HKDF takes a key pointer even when the secret is empty (a job run open).
  static const unsigned char kNoSecret = 0;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_KEY, secret.empty() ? const_cast<unsigned char*>(&kNoSecret) : (void*)secret.data(),
          secret.empty() ? 1 : secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void*)transcript.data(), transcript.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void*)label.data(), label.size()),
      OSSL_PARAM_construct_end()};
  unsigned char okm[kAeadKeyBytes + 4];
  const int rc = EVP_KDF_derive(kctx, okm, sizeof okm, params);
  EVP_KDF_CTX_free(kctx);
  if (rc != 1) libcrypto_failed("HKDF-SHA256");
  DirectionKey k;
  std::memcpy(k.key.data(), okm, kAeadKeyBytes);
  std::memcpy(k.nonce_prefix.data(), okm + kAeadKeyBytes, 4);
  OPENSSL_cleanse(okm, sizeof okm);
  return k;
}

struct AeadDirection::Ctx {
  EVP_CIPHER_CTX* c = nullptr;
};

AeadDirection::AeadDirection(Cipher cipher, const DirectionKey& key, bool encrypt, bool sealing)
    : ctx_(new Ctx), cipher_(cipher), key_(key), encrypt_(encrypt), sealing_(sealing) {
  ctx_->c = EVP_CIPHER_CTX_new();
  if (!ctx_->c) libcrypto_failed("cipher context");
  // The key is set once; each record only sets its nonce (start_record).
  const int ok = sealing ? EVP_EncryptInit_ex(ctx_->c, evp_cipher(cipher), nullptr, key.key.data(), nullptr)
                         : EVP_DecryptInit_ex(ctx_->c, evp_cipher(cipher), nullptr, key.key.data(), nullptr);
  if (ok != 1) libcrypto_failed("cipher init");
}

AeadDirection::~AeadDirection() {
  EVP_CIPHER_CTX_free(ctx_->c);
  OPENSSL_cleanse(key_.key.data(), key_.key.size());
  delete ctx_;
}

void AeadDirection::start_record() {
  // 96-bit nonce: the per-direction prefix, then the record number (big-endian). The
  // number never repeats under one key: 2^64 records of 64 KiB is beyond any job.
  unsigned char nonce[12];
  std::memcpy(nonce, key_.nonce_prefix.data(), 4);
  for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<unsigned char>(seq_ >> (56 - 8 * i));
  const int ok = sealing_ ? EVP_EncryptInit_ex(ctx_->c, nullptr, nullptr, nullptr, nonce)
                          : EVP_DecryptInit_ex(ctx_->c, nullptr, nullptr, nullptr, nonce);
  if (ok != 1) libcrypto_failed("cipher nonce");
  ++seq_;
}

void AeadDirection::seal(std::string_view aad, const iovec* parts, int n_parts, size_t total, unsigned char* out,
                         unsigned char tag[kAeadTagBytes]) {
  start_record();
  EVP_CIPHER_CTX* c = ctx_->c;
  int len = 0;
  if (!aad.empty() &&
      EVP_EncryptUpdate(c, nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()), int(aad.size())) != 1)
    libcrypto_failed("seal aad");
  size_t at = 0;
  for (int i = 0; i < n_parts && at < total; ++i) {
    const size_t n = std::min(parts[i].iov_len, total - at);
    const auto* src = static_cast<const unsigned char*>(parts[i].iov_base);
    if (encrypt_) {
      if (EVP_EncryptUpdate(c, out + at, &len, src, int(n)) != 1) libcrypto_failed("seal");
    } else {
      // Authenticate only: the bytes travel as they are and enter the tag as data.
      if (EVP_EncryptUpdate(c, nullptr, &len, src, int(n)) != 1) libcrypto_failed("seal aad");
      std::memcpy(out + at, src, n);
    }
    at += n;
  }
  if (EVP_EncryptFinal_ex(c, out + at, &len) != 1) libcrypto_failed("seal final");
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, int(kAeadTagBytes), tag) != 1) libcrypto_failed("seal tag");
}

void AeadDirection::open(std::string_view aad, const unsigned char* in, size_t n, unsigned char* out,
                         const unsigned char tag[kAeadTagBytes]) {
  const uint64_t record = seq_;
  start_record();
  EVP_CIPHER_CTX* c = ctx_->c;
  int len = 0;
  if (!aad.empty() &&
      EVP_DecryptUpdate(c, nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()), int(aad.size())) != 1)
    libcrypto_failed("open aad");
  if (encrypt_) {
    if (n && EVP_DecryptUpdate(c, out, &len, in, int(n)) != 1) libcrypto_failed("open");
  } else {
    if (n && EVP_DecryptUpdate(c, nullptr, &len, in, int(n)) != 1) libcrypto_failed("open aad");
  }
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, int(kAeadTagBytes), const_cast<unsigned char*>(tag)) != 1)
    libcrypto_failed("open tag");
  unsigned char none[16];
  if (EVP_DecryptFinal_ex(c, encrypt_ ? out + n : none, &len) != 1)
    throw AuthFailure("record " + std::to_string(record) + " (" + std::to_string(n) +
                      " bytes) failed its authentication check: its bytes were changed, replayed, reordered or "
                      "sealed with another key");
  // Authenticated only: the bytes are copied out after their check, never before.
  if (!encrypt_ && out != in) std::memcpy(out, in, n);
}

}  // namespace dpt::crypto
