// The record layer (comm/net/aead.h, comm/net/record_stream.h) against published test
// vectors (RFC 5869 for the key derivation, the GCM specification's test case 14 for
// AES-256-GCM), then its own properties over a socket pair: every size and split round
// trips under both ciphers and both modes; a flipped bit, a replayed, dropped or
// reordered record, and bytes injected in clear are each refused; ciphertext shows no
// trace of a known plaintext pattern while the authenticate-only mode carries it as is.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/net/aead.h"
#include "comm/net/hmac.h"
#include "comm/net/record_stream.h"
#include "comm/net/socket.h"

using namespace dpt;
using namespace std::chrono_literals;

namespace {

std::string hex(const unsigned char* p, size_t n) { return crypto::to_hex(p, n); }

std::vector<unsigned char> unhex(const std::string& h) {
  std::vector<unsigned char> out(h.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<unsigned char>(std::stoi(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

std::string_view view(const std::vector<unsigned char>& v) { return {reinterpret_cast<const char*>(v.data()), v.size()}; }

// A connected pair of stream sockets; [0] writes, [1] reads.
struct Pair {
  net::Socket a, b;
  Pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    a = net::Socket(fds[0]);
    b = net::Socket(fds[1]);
  }
};

crypto::DirectionKey test_key(unsigned char fill) {
  crypto::DirectionKey k;
  k.key.fill(fill);
  k.nonce_prefix = {1, 2, 3, fill};
  return k;
}

// Seals `plain` into records as the writer does, returning the wire bytes.
std::string seal_all(crypto::Cipher c, const crypto::DirectionKey& k, bool encrypt, const std::string& plain) {
  net::RecordWriter w(c, k, encrypt);
  w.seal(plain.data(), plain.size());
  std::string out;
  w.take(out);
  return out;
}

// Feeds `wire` to a reader through a socket pair and returns what it yields; throws
// what the reader throws.
std::string open_all(crypto::Cipher c, const crypto::DirectionKey& k, bool encrypt, const std::string& wire,
                     size_t expect) {
  Pair p;
  // Written by another thread: the pair's buffers hold less than the biggest case.
  std::thread writer([&] {
    try {
      net::send_all(p.a.fd(), wire.data(), wire.size(), net::Clock::now() + 5s, "pair");
    } catch (const net::SocketError&) {
      // the reader gave up first (a refused record): nothing more to send
    }
    ::shutdown(p.a.fd(), SHUT_WR);
  });
  net::RecordReader r(c, k, encrypt);
  std::string out(expect, '\0');
  try {
    r.read_all(p.b.fd(), out.data(), out.size(), net::Clock::now() + 5s, "pair");
  } catch (...) {
    p.b.close();
    writer.join();
    throw;
  }
  writer.join();
  return out;
}

// Offsets of each record in a wire string.
std::vector<std::pair<size_t, size_t>> records_of(const std::string& wire) {
  std::vector<std::pair<size_t, size_t>> recs;
  size_t at = 0;
  while (at < wire.size()) {
    uint32_t len;
    std::memcpy(&len, wire.data() + at, 4);
    const size_t n = net::kRecordOverhead + len;
    recs.push_back({at, n});
    at += n;
  }
  return recs;
}

}  // namespace

TEST_CASE("records: HKDF-SHA256 matches RFC 5869 test case 1") {
  // IKM 0x0b x 22, salt 0x00..0x0c, info 0xf0..0xf9: the first 36 bytes of its OKM are the
  // key (32) and the nonce prefix (4).
  const auto ikm = unhex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b");
  const auto salt = unhex("000102030405060708090a0b0c");
  const auto info = unhex("f0f1f2f3f4f5f6f7f8f9");
  const crypto::DirectionKey k = crypto::derive_direction_key(view(ikm), view(salt), view(info));
  CHECK(hex(k.key.data(), 32) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf");
  CHECK(hex(k.nonce_prefix.data(), 4) == "34007208");
  // Another label, another key: the two directions of a connection never share one.
  const crypto::DirectionKey other = crypto::derive_direction_key(view(ikm), view(salt), "other");
  CHECK(hex(other.key.data(), 32) != hex(k.key.data(), 32));
}

TEST_CASE("records: AES-256-GCM matches the GCM specification's test case 14") {
  // Key 0^32, IV 0^12, plaintext 0^16: the first record of a direction whose nonce
  // prefix is zero has exactly that IV (prefix || record number 0).
  crypto::DirectionKey k;  // all zero
  crypto::AeadDirection seal(crypto::Cipher::aes256_gcm, k, true, true);
  unsigned char plain[16] = {}, out[16], tag[16];
  iovec part{plain, sizeof plain};
  seal.seal({}, &part, 1, sizeof plain, out, tag);
  CHECK(hex(out, 16) == "cea7403d4d606b6e074ec5d3baf39d18");
  CHECK(hex(tag, 16) == "d0d1c8a799996bf0265b98b5d48ab919");
  crypto::AeadDirection open(crypto::Cipher::aes256_gcm, k, true, false);
  unsigned char back[16];
  open.open({}, out, 16, back, tag);
  CHECK(std::memcmp(back, plain, 16) == 0);
}

TEST_CASE("records: every size and split round-trips, both ciphers, both modes") {
  std::mt19937 rng(7);
  for (auto cipher : {crypto::Cipher::aes256_gcm, crypto::Cipher::chacha20_poly1305})
    for (bool encrypt : {true, false}) {
      const auto k = test_key(9);
      for (size_t n : {size_t(1), size_t(15), size_t(65536), size_t(65537), size_t(300000)}) {
        std::string plain(n, '\0');
        for (auto& ch : plain) ch = static_cast<char>(rng());
        // Sealed through many small gathers, as the engine does with frame headers.
        net::RecordWriter w(cipher, k, encrypt);
        size_t at = 0;
        while (at < n) {
          const size_t piece = std::min<size_t>(n - at, 1 + rng() % 70000);
          iovec iov[2] = {{plain.data() + at, piece / 2}, {plain.data() + at + piece / 2, piece - piece / 2}};
          at += w.seal(iov, 2, piece);
        }
        std::string wire;
        w.take(wire);
        INFO(crypto::cipher_name(cipher) << " encrypt " << encrypt << " bytes " << n);
        CHECK(open_all(cipher, k, encrypt, wire, n) == plain);
        if (n >= 64) CHECK((wire.find(plain.substr(0, 64)) != std::string::npos) == !encrypt);
      }
    }
}

TEST_CASE("records: tampering, replay, loss, reordering and injected clear bytes are refused") {
  const auto cipher = crypto::preferred_cipher();
  for (bool encrypt : {true, false}) {
    INFO("encrypt " << encrypt);
    const auto k = test_key(3);
    std::string plain(3 * net::kMaxRecordPlain, '\0');
    for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<char>(i * 31 + 7);
    const std::string wire = seal_all(cipher, k, encrypt, plain);
    const auto recs = records_of(wire);
    REQUIRE(recs.size() == 3);
    CHECK(open_all(cipher, k, encrypt, wire, plain.size()) == plain);  // untouched: fine

    auto refused = [&](const std::string& bad) {
      try {
        open_all(cipher, k, encrypt, bad, plain.size());
      } catch (const crypto::AuthFailure& e) {
        return std::string(e.what()).find("record") != std::string::npos;
      } catch (...) {
        return false;  // an end of stream or another error is not a detection
      }
      return false;
    };
    for (size_t where : {size_t(0), size_t(3), size_t(4), size_t(1000), recs[1].first + 5, wire.size() - 1}) {
      std::string bad = wire;
      bad[where] = static_cast<char>(bad[where] ^ 0x01);
      INFO("bit flipped at byte " << where);
      CHECK(refused(bad));
    }
    const std::string r0 = wire.substr(recs[0].first, recs[0].second);
    const std::string r1 = wire.substr(recs[1].first, recs[1].second);
    const std::string r2 = wire.substr(recs[2].first, recs[2].second);
    CHECK(refused(r0 + r0 + r1 + r2));  // replayed
    CHECK(refused(r0 + r2 + r1));       // reordered
    CHECK(refused(r0 + r2 + r2));       // one lost (and another replayed to fill the gap)
    // A frame in clear, as an attacker without the key would inject one: its magic read as
    // a record length is far beyond the limit.
    CHECK(refused(r0 + std::string("DPTF\x01\x00\x03\x00", 8) + std::string(16, '\0') + r1 + r2));
    // Another key (another connection or direction): refused from the first record.
    CHECK(refused(seal_all(cipher, test_key(4), encrypt, plain)));
  }
}

TEST_CASE("records: a reader hands out nothing of a record that fails its check") {
  const auto cipher = crypto::preferred_cipher();
  const auto k = test_key(5);
  std::string plain(1000, 'P');
  std::string wire = seal_all(cipher, k, false, plain);  // plaintext on the wire
  wire[100] = 'X';                                        // the attacker's byte
  Pair p;
  net::send_all(p.a.fd(), wire.data(), wire.size(), net::Clock::now() + 2s, "pair");
  net::RecordReader r(cipher, k, false);
  std::string dst(1000, '.');
  CHECK_THROWS_AS(r.read(p.b.fd(), dst.data(), dst.size()), crypto::AuthFailure);
  CHECK(dst == std::string(1000, '.'));  // not one byte, tampered or not, reached dst
}
