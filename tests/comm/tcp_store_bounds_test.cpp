// What one authenticated client can make the store hold (tcp_store_server.cpp, "bounds"):
// a client pipelining gets of a 16 MiB value without reading a reply is cut off with the
// server's memory bounded; waits on keys never set leave nothing behind once answered;
// the caps on keys and bytes and the write-once keys refuse with errors naming them.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
#include <atomic>

#include "comm/error.h"
#include "comm/net/record_stream.h"
#include "comm/net/secure_session.h"
#include "comm/net/socket.h"
#include "comm/store/job_token.h"
#include "comm/store/tcp_store.h"
#include "comm/store/tcp_store_protocol.h"
#include "comm/store/tcp_store_request.h"

using namespace dpt;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// The most resident memory this process (the server runs in it) has held, MiB: its
// peak, since freed buffers go back to the system before a test could look.
double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// A client of the store written from the protocol (tcp_store_protocol.h), so it can do
// what TcpStoreClient never does: send requests without reading the replies.
struct RawClient {
  net::Socket sock;
  std::unique_ptr<net::RecordChannel> rec;
  explicit RawClient(int port) {
    sock = net::connect_with_retry("127.0.0.1", port, Clock::now() + 2s);
    store_proto::AuthHello h;
    h.nonce = crypto::random_nonce();
    h.cipher = static_cast<uint8_t>(crypto::preferred_cipher());
    const std::string hello = store_proto::encode_auth_hello(h);
    net::send_all(sock.fd(), hello.data(), hello.size(), Clock::now() + 2s, "store");
    char theirs[store_proto::kAuthHelloBytes];
    net::recv_all(sock.fd(), theirs, sizeof theirs, Clock::now() + 2s, "store");
    const std::string transcript = hello + std::string(theirs, sizeof theirs);
    const crypto::Mac proof = handshake_proof("", store_proto::kClientProofLabel, transcript);
    net::send_all(sock.fd(), proof.data(), proof.size(), Clock::now() + 2s, "store");
    unsigned char server_proof[32];
    net::recv_all(sock.fd(), server_proof, sizeof server_proof, Clock::now() + 2s, "store");
    const auto server = store_proto::decode_auth_hello(std::string_view(theirs, sizeof theirs));
    rec = std::make_unique<net::RecordChannel>(*net::make_session(
        {"", transcript, store_proto::kClientKeyLabel, store_proto::kServerKeyLabel, true, true,
         crypto::agree_cipher(crypto::Cipher(h.cipher), crypto::Cipher(server.cipher))},
        sock.fd()));
  }
  // Sends `n` copies of `request` in one go; false once the server closed on us.
  bool pipeline(const store_proto::StoreRequest& request, int n) {
    const std::string msg = store_proto::store_message(store_proto::encode_store_request(request));
    for (int i = 0; i < n; ++i) rec->writer.seal(msg.data(), msg.size());
    try {
      rec->writer.write_all(sock.fd(), Clock::now() + 10s, "store");
      return true;
    } catch (const net::SocketError&) {
      return false;
    }
  }
  // True when the server closes the connection within `t` (reading and dropping replies).
  bool closed_within(Millis t) {
    const auto deadline = Clock::now() + t;
    char buf[65536];
    while (Clock::now() < deadline) {
      if (!net::wait_fd(sock.fd(), POLLIN, std::min(deadline, Clock::now() + 100ms))) continue;
      const ssize_t r = ::recv(sock.fd(), buf, sizeof buf, 0);
      if (r <= 0) return true;
    }
    return false;
  }
};

}  // namespace

TEST_CASE("store bounds: a client pipelining gets of a 16 MiB value without reading is cut off") {
  TcpStoreServer server("127.0.0.1", 0, "");
  TcpStoreClient good("127.0.0.1", server.port(), 5000ms, {}, "");
  good.set("big", std::string(16u << 20, 'x'));
  const double before = peak_rss_mib();
  RawClient greedy(server.port());
  // 40 gets: 640 MiB of replies if they were all queued.
  greedy.pipeline(store_proto::StoreRequest::get("big", 0), 40);
  CHECK(greedy.closed_within(10s));
  const double grew = peak_rss_mib() - before;
  INFO("the server's process peaked " << grew << " MiB higher");
  CHECK(grew < 200);  // the cap is 64 MiB of unread replies (and one value being sealed)
  CHECK(good.get("big", 1000ms).size() == (16u << 20));  // everyone else is still served
}

TEST_CASE("store bounds: waits on keys never set leave nothing behind") {
  TcpStoreServer server("127.0.0.1", 0, "");
  TcpStoreClient c("127.0.0.1", server.port(), 5000ms, {}, "");
  const double before = peak_rss_mib();
  for (int i = 0; i < 20000; ++i) CHECK_THROWS_AS(c.wait({"never/" + std::to_string(i)}, 0ms), TimeoutError);
  CHECK(server.watched_keys() == 0);
  CHECK(peak_rss_mib() - before < 64);
}

TEST_CASE("store bounds: write-once keys and the caps on keys and bytes refuse by name") {
  ::setenv("COMM_STORE_MAX_KEYS", "8", 1);
  ::setenv("COMM_STORE_MAX_BYTES", "4096", 1);
  TcpStoreServer server("127.0.0.1", 0, "");
  ::unsetenv("COMM_STORE_MAX_KEYS");
  ::unsetenv("COMM_STORE_MAX_BYTES");
  TcpStoreClient c("127.0.0.1", server.port(), 5000ms, {}, "");
  c.set("tcp/3/addr/1", "10.0.0.2 4000");
  c.set("tcp/3/addr/1", "10.0.0.2 4000");  // a retried set: the same value is fine
  try {
    c.set("tcp/3/addr/1", "10.6.6.6 4000");
    FAIL("a rank's address was overwritten");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("written once") != std::string::npos);
  }
  c.set("tcp/3/job", "42");
  CHECK_THROWS_WITH(c.set("tcp/3/job", "43"), Catch::Contains("written once"));
  c.set("counter", "1");
  c.set("counter", "2");  // ordinary keys change freely
  CHECK_THROWS_WITH(c.set("huge", std::string(5000, 'v')), Catch::Contains("COMM_STORE_MAX_BYTES=4096"));
  for (int i = 0; i < 5; ++i) c.set("k" + std::to_string(i), "v");
  CHECK_THROWS_WITH(c.set("one-too-many", "v"), Catch::Contains("COMM_STORE_MAX_KEYS=8"));
  CHECK(c.get("tcp/3/addr/1", 1000ms) == "10.0.0.2 4000");
}

// A benchmark command, not part of the suite (docs/security.md):
//   build/bin/tcp_store_test "[million]"
// A million waits on keys never set, pipelined by 250 clients of 4000 each (one client's
// waits are answered one after the other, at the server's millisecond timer), then the
// server's peak memory and what it still watches.
TEST_CASE("store bounds: a million pipelined waits on keys never set", "[.][million]") {
  TcpStoreServer server("127.0.0.1", 0, "");
  const double before = peak_rss_mib();
  constexpr int kClients = 250, kEach = 4000;
  std::atomic<long> answered{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int k = 0; k < kClients; ++k)
    clients.emplace_back([&, k] {
      RawClient c(server.port());
      for (int i = 0; i < kEach; ++i) {
        const std::string msg = store_proto::store_message(store_proto::encode_store_request(
            store_proto::StoreRequest::wait({"never/" + std::to_string(k) + "/" + std::to_string(i)}, 0)));
        c.rec->writer.seal(msg.data(), msg.size());
      }
      c.rec->writer.write_all(c.sock.fd(), Clock::now() + 600s, "store");
      char header[8];
      for (int i = 0; i < kEach; ++i) {
        c.rec->reader.read_all(c.sock.fd(), header, 8, Clock::now() + 600s, "store");
        uint32_t len;
        std::memcpy(&len, header + 4, 4);
        std::string body(len, '\0');
        c.rec->reader.read_all(c.sock.fd(), body.data(), len, Clock::now() + 600s, "store");
        ++answered;
      }
    });
  for (auto& t : clients) t.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%ld waits on keys never set answered in %.1f s (%.0f/s); the server's peak grew %.1f MiB; "
              "keys still watched: %lld\n",
              answered.load(), s, answered.load() / s, peak_rss_mib() - before, (long long)server.watched_keys());
  CHECK(answered.load() == long(kClients) * kEach);
  CHECK(server.watched_keys() == 0);
}
