// The record layer's own speed on one core (bench/record_cost.sh): seal then open 256 MiB
// in 64 KiB records through RecordWriter/RecordReader's cipher contexts, for each cipher,
// encrypted and authenticated only; the GB/s of each direction. The figure to hold against
// a link: a rank seals what it sends and opens what it receives, on its engine thread.
#include <chrono>
#include <cstdio>
#include <vector>

#include "comm/net/aead.h"
#include "comm/net/record_stream.h"

using namespace dpt;

int main() {
  constexpr size_t kTotal = 256u << 20, kRec = net::kMaxRecordPlain;
  std::vector<unsigned char> plain(kRec, 0x5a), wire(kRec), back(kRec);
  unsigned char tag[crypto::kAeadTagBytes];
  std::printf("%-18s %-8s %10s %10s\n", "cipher", "mode", "seal GB/s", "open GB/s");
  for (auto cipher : {crypto::Cipher::aes256_gcm, crypto::Cipher::chacha20_poly1305})
    for (bool encrypt : {true, false}) {
      crypto::DirectionKey key;
      key.key.fill(7);
      crypto::AeadDirection seal(cipher, key, encrypt, true), open(cipher, key, encrypt, false);
      iovec part{plain.data(), kRec};
      const unsigned char head[4] = {0, 0, 1, 0};
      const std::string_view aad(reinterpret_cast<const char*>(head), 4);
      double seal_s = 0, open_s = 0;
      for (size_t done = 0; done < kTotal; done += kRec) {
        auto t0 = std::chrono::steady_clock::now();
        seal.seal(aad, &part, 1, kRec, wire.data(), tag);
        auto t1 = std::chrono::steady_clock::now();
        open.open(aad, wire.data(), kRec, back.data(), tag);
        auto t2 = std::chrono::steady_clock::now();
        seal_s += std::chrono::duration<double>(t1 - t0).count();
        open_s += std::chrono::duration<double>(t2 - t1).count();
      }
      std::printf("%-18s %-8s %10.2f %10.2f\n", crypto::cipher_name(cipher), encrypt ? "encrypt" : "auth",
                  kTotal / seal_s / 1e9, kTotal / open_s / 1e9);
    }
  std::printf("preferred on this CPU: %s\n", crypto::cipher_name(crypto::preferred_cipher()));
}
