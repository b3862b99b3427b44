// TcpStoreServer / TcpStoreClient / rendezvous in one process: threads play the
// clients (ranks). Also feeds the server garbage and checks it keeps serving.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "comm/store/rendezvous.h"
#include "comm/net/socket.h"
#include "comm/store/tcp_store.h"
#include "comm/store/tcp_store_protocol.h"
#include "comm/wire.h"

using namespace dpt;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

TcpStoreClient client_for(const TcpStoreServer& s, Millis timeout = 5000ms) {
  return TcpStoreClient("127.0.0.1", s.port(), timeout);
}

// Sends raw bytes on a fresh connection and reports whether the server closed it
// (recv returns 0 or an error) within `within`.
bool server_closes_after(const TcpStoreServer& s, const std::string& bytes, Millis within = 3000ms) {
  net::Socket sock = net::connect_with_retry("127.0.0.1", s.port(), Clock::now() + 2s);
  try {
    net::send_all(sock.fd(), bytes.data(), bytes.size(), Clock::now() + 2s, "server");
  } catch (const net::SocketError&) {
    return true;  // closed while we were still writing
  }
  char buf[256];
  try {
    net::recv_all(sock.fd(), buf, 1, Clock::now() + within, "server");
  } catch (const net::SocketClosed&) {
    return true;
  } catch (const net::SocketTimeout&) {
    return false;
  }
  return false;  // it answered something: not expected for garbage
}

std::string header(uint32_t magic, uint32_t len) {
  std::string h;
  wire::put_u32(h, magic);
  wire::put_u32(h, len);
  return h;
}

}  // namespace

TEST_CASE("store: set, get, add, check, wait") {
  TcpStoreServer server("127.0.0.1", 0);
  REQUIRE(server.port() > 0);
  auto c = client_for(server);
  c.set("a", "1");
  CHECK(c.get("a", 1000ms) == "1");
  c.set("a", std::string("bin\0ary", 7));
  CHECK(c.get("a", 1000ms) == std::string("bin\0ary", 7));
  CHECK(c.add("n", 5) == 5);
  CHECK(c.add("n", -2) == 3);
  CHECK(c.get("n", 1000ms) == "3");
  CHECK(c.check("n"));
  CHECK_FALSE(c.check("missing"));
  c.wait({"a", "n"}, 1000ms);
  c.set("empty", "");
  CHECK(c.get("empty", 1000ms).empty());
  // add on a non-integer value is an error, not a crash, and the connection survives.
  CHECK_THROWS_AS(c.add("a", 1), UsageError);
  CHECK(c.get("n", 1000ms) == "3");
}

TEST_CASE("store: blocking get and wait are released by a set from another client") {
  TcpStoreServer server("127.0.0.1", 0);
  std::thread setter([&] {
    auto c = client_for(server);
    std::this_thread::sleep_for(150ms);
    c.set("k1", "v1");
    std::this_thread::sleep_for(50ms);
    c.set("k2", "v2");
  });
  auto c = client_for(server);
  auto t0 = Clock::now();
  CHECK(c.get("k1", 5000ms) == "v1");
  c.wait({"k1", "k2"}, 5000ms);
  CHECK(Clock::now() - t0 < 3s);
  setter.join();
}

TEST_CASE("store: timeouts name the missing keys") {
  TcpStoreServer server("127.0.0.1", 0);
  auto c = client_for(server);
  c.set("present", "x");
  try {
    c.wait({"present", "absent1", "absent2"}, 200ms);
    FAIL("wait did not time out");
  } catch (const TimeoutError& e) {
    std::string m = e.what();
    CHECK(m.find("absent1") != std::string::npos);
    CHECK(m.find("absent2") != std::string::npos);
    CHECK(m.find("[present") == std::string::npos);
    CHECK(m.find("2 of 3 keys missing") != std::string::npos);
  }
  try {
    c.get("nothere", 100ms);
    FAIL("get did not time out");
  } catch (const TimeoutError& e) {
    CHECK(std::string(e.what()).find("nothere") != std::string::npos);
  }
  // The connection is still in step after timeouts.
  CHECK(c.get("present", 100ms) == "x");
}

TEST_CASE("store: many clients add concurrently") {
  TcpStoreServer server("127.0.0.1", 0);
  constexpr int kThreads = 16, kAdds = 200;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&] {
      auto c = client_for(server);
      for (int i = 0; i < kAdds; ++i) c.add("counter", 1);
    });
  for (auto& t : ts) t.join();
  auto c = client_for(server);
  CHECK(c.get("counter", 1000ms) == std::to_string(kThreads * kAdds));
  // One client shared by threads (calls are serialized on its connection).
  std::vector<std::thread> ts2;
  for (int t = 0; t < 8; ++t)
    ts2.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) c.set("k" + std::to_string(t), std::to_string(i));
    });
  for (auto& t : ts2) t.join();
  CHECK(c.get("k3", 1000ms) == "49");
}

TEST_CASE("store: garbage, oversized and HTTP requests are rejected; the server keeps serving") {
  TcpStoreServer server("127.0.0.1", 0);
  auto good = client_for(server);
  good.set("before", "1");
  // A client parked in a wait while the garbage arrives must still be answered.
  std::thread waiter([&] {
    auto c = client_for(server);
    c.wait({"after"}, 10000ms);
  });

  CHECK(server_closes_after(server, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  std::mt19937 rng(42);
  std::string noise(4096, '\0');
  for (auto& ch : noise) ch = static_cast<char>(rng());
  CHECK(server_closes_after(server, noise));
  CHECK(server_closes_after(server, header(store_proto::kMagic, 0xffffffffu)));             // oversized
  CHECK(server_closes_after(server, header(store_proto::kMagic, 0)));                       // empty body
  CHECK(server_closes_after(server, header(store_proto::kMagic, 1) + std::string(1, 99)));  // unknown cmd
  {
    // A set whose key length runs past the end of the body.
    std::string body;
    wire::put_u8(body, store_proto::kSet);
    wire::put_u32(body, 1000);
    body += "short";
    CHECK(server_closes_after(server, header(store_proto::kMagic, static_cast<uint32_t>(body.size())) + body));
  }
  {
    // A valid set followed by trailing junk inside the body: rejected without applying.
    std::string body;
    wire::put_u8(body, store_proto::kSet);
    wire::put_str(body, "junk-key");
    wire::put_str(body, "v");
    body += "xyz";
    CHECK(server_closes_after(server, header(store_proto::kMagic, static_cast<uint32_t>(body.size())) + body));
    CHECK_FALSE(good.check("junk-key"));
  }
  // A connection that promises a body and never sends it does not block anyone.
  net::Socket stalled = net::connect_with_retry("127.0.0.1", server.port(), Clock::now() + 2s);
  std::string partial = header(store_proto::kMagic, 1000);
  net::send_all(stalled.fd(), partial.data(), partial.size(), Clock::now() + 1s, "server");

  CHECK(server.rejected_connections() >= 7);
  good.set("after", "2");
  CHECK(good.get("before", 1000ms) == "1");
  CHECK(good.get("after", 1000ms) == "2");
  waiter.join();
}

TEST_CASE("store: client connects before the server starts, and reports a dead server") {
  int port = 0;
  {
    TcpStoreServer probe("127.0.0.1", 0);  // find a free port
    port = probe.port();
  }
  std::unique_ptr<TcpStoreServer> server;
  std::thread later([&] {
    std::this_thread::sleep_for(200ms);
    server = std::make_unique<TcpStoreServer>("127.0.0.1", port);
  });
  TcpStoreClient c("127.0.0.1", port, 5000ms);
  c.set("x", "1");  // retries until the server listens
  later.join();
  CHECK(c.get("x", 100ms) == "1");
  server.reset();
  CHECK_THROWS_AS(c.get("x", 100ms), CommError);
}

TEST_CASE("store: IPv6 loopback") {
  std::unique_ptr<TcpStoreServer> server;
  try {
    server = std::make_unique<TcpStoreServer>("::1", 0);
  } catch (const net::SocketError& e) {
    WARN("skipping: no IPv6 loopback here: " << e.what());
    return;
  }
  TcpStoreClient c("::1", server->port(), 2000ms);
  c.set("v6", "yes");
  CHECK(c.get("v6", 100ms) == "yes");
  CHECK(c.address() == "[::1]:" + std::to_string(server->port()));
}

TEST_CASE("rendezvous: all ranks join") {
  TcpStoreServer server("127.0.0.1", 0);
  constexpr int kWorld = 5;
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r)
    ts.emplace_back([&, r] {
      auto c = client_for(server);
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * r));
      rendezvous(c, "job", r, kWorld, 5000ms);
      ++ok;
    });
  for (auto& t : ts) t.join();
  CHECK(ok == kWorld);
}

TEST_CASE("rendezvous: a missing rank is named at the timeout") {
  TcpStoreServer server("127.0.0.1", 0);
  constexpr int kWorld = 4;
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r) {
    if (r == 2) continue;
    ts.emplace_back([&, r] {
      auto c = client_for(server);
      try {
        rendezvous(c, "job", r, kWorld, 600ms);
      } catch (const TimeoutError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  for (int r : {0, 1, 3}) {
    INFO(errors[r]);
    CHECK(errors[r].find("3 of 4 ranks joined") != std::string::npos);
    CHECK(errors[r].find("missing ranks [2]") != std::string::npos);
  }
}

TEST_CASE("rendezvous: a rank known to be gone fails it at once, not at the deadline", "[store]") {
  // An elastic member that died after its generation's list closed: its launcher marked
  // it dead, and the others need not wait out the rendezvous timeout for it.
  TcpStoreServer server("127.0.0.1", 0);
  std::vector<std::string> errors(2);
  std::vector<double> seconds(2);
  std::vector<std::thread> ts;
  for (int r : {0, 1}) {
    ts.emplace_back([&, r] {
      auto c = client_for(server);
      const auto t0 = Clock::now();
      try {
        rendezvous(c, "job", r, 3, 20000ms, {}, [](int rank) { return rank == 2; });
      } catch (const PeerError& e) {
        errors[size_t(r)] = e.what();
      }
      seconds[size_t(r)] = std::chrono::duration<double>(Clock::now() - t0).count();
    });
  }
  for (auto& t : ts) t.join();
  for (int r : {0, 1}) {
    INFO(errors[size_t(r)]);
    CHECK(errors[size_t(r)].find("rank(s) [2] will not join") != std::string::npos);
    CHECK(seconds[size_t(r)] < 5.0);
  }
}

TEST_CASE("rendezvous: a duplicate rank is rejected clearly and quickly") {
  TcpStoreServer server("127.0.0.1", 0);
  std::vector<std::string> errors(3);
  std::vector<std::thread> ts;
  auto t0 = Clock::now();
  // Two processes both claim rank 1 of 3; rank 2 never comes (its slot was taken).
  int claimed[3] = {0, 1, 1};
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&, i] {
      auto c = client_for(server);
      try {
        rendezvous(c, "job", claimed[i], 3, 10000ms);
      } catch (const CommError& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  CHECK(Clock::now() - t0 < 5s);
  for (const auto& e : errors) {
    INFO(e);
    CHECK(e.find("rank 1 was claimed by two processes") != std::string::npos);
  }
}

TEST_CASE("rendezvous: different world sizes are a mismatch") {
  TcpStoreServer server("127.0.0.1", 0);
  std::string err;
  std::thread r0([&] {
    auto c = client_for(server);
    try {
      rendezvous(c, "job", 0, 2, 1500ms);
    } catch (const CommError&) {
    }
  });
  std::thread r1([&] {
    auto c = client_for(server);
    try {
      rendezvous(c, "job", 1, 3, 1500ms);
    } catch (const MismatchError& e) {
      err = e.what();
    } catch (const CommError& e) {
      err = std::string("wrong type: ") + e.what();
    }
  });
  r0.join();
  r1.join();
  INFO(err);
  CHECK(err.find("WORLD_SIZE=3 but rank 0 has 2") != std::string::npos);
}

TEST_CASE("format_rank_list compresses runs") {
  CHECK(format_rank_list({}) == "[]");
  CHECK(format_rank_list({2}) == "[2]");
  CHECK(format_rank_list({0, 1, 2, 5, 7, 8}) == "[0-2, 5, 7, 8]");
}
