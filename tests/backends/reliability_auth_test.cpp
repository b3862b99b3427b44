// The job token handshakes: HMAC-SHA256 against RFC 4231, the store's auth (right
// token, wrong token, garbage, a replayed-looking hello with a bad proof), and the
// mesh's hello/ack/proof exchange, including an attacker who knows everything but the
// token. Single process: threads play the ranks.
#include <catch2/catch.hpp>

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "backends/tcp/frame.h"
#include "backends/tcp/mesh.h"
#include "comm/net/hmac.h"
#include "comm/net/record_stream.h"
#include "comm/net/secure_session.h"
#include "comm/store/job_token.h"
#include "comm/net/socket.h"
#include "comm/store/tcp_store.h"
#include "comm/store/tcp_store_protocol.h"
#include "comm/store/tcp_store_request.h"
#include "comm/wire.h"

using namespace dpt;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "test-token-0123456789abcdef-right";
const std::string kWrongToken = "test-token-0123456789abcdef-WRONG";

std::string hex_mac(std::string_view key, std::string_view data) {
  crypto::Mac m = crypto::hmac_sha256(key, data);
  return crypto::to_hex(m.data(), m.size());
}

net::Socket raw_connect(int port) {
  return net::connect_with_retry("127.0.0.1", port, net::Clock::now() + 5s);
}

// True when the peer closed the connection within 5 s (what a rejection looks like).
bool closed_by_peer(int fd) {
  char b[256];
  auto deadline = net::Clock::now() + 5s;
  while (net::Clock::now() < deadline) {
    try {
      net::recv_all(fd, b, 1, net::Clock::now() + 200ms, "peer");
    } catch (const net::SocketClosed&) {
      return true;
    } catch (const net::SocketTimeout&) {
      continue;
    } catch (const net::SocketError&) {
      return true;  // reset
    }
  }
  return false;
}

// A client hello of the store's handshake (its nonce all `fill`), asking for encryption.
std::string raw_store_hello(char fill) {
  store_proto::AuthHello h;
  std::memset(h.nonce.data(), fill, h.nonce.size());
  h.encrypt = true;
  h.cipher = static_cast<uint8_t>(crypto::preferred_cipher());
  return store_proto::encode_auth_hello(h);
}

// True when a byte can be read from `fd` within `t` (the peer sent more).
bool readable_within(int fd, Millis t) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, int(t.count())) == 1;
}

void wait_for(const std::function<bool()>& cond) {
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!cond() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
}

}  // namespace

TEST_CASE("HMAC-SHA256 matches RFC 4231 test cases 1, 2, 6 and 7") {
  CHECK(hex_mac(std::string(20, '\x0b'), "Hi There") ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex_mac("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex_mac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(hex_mac(std::string(131, '\xaa'),
                "This is a test using a larger than block-size key and a larger than block-size data. The key "
                "needs to be hashed before being used by the HMAC algorithm.") ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
  unsigned char a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
  CHECK(crypto::constant_time_equal(a, a, 4));
  CHECK_FALSE(crypto::constant_time_equal(a, b, 4));
  CHECK(generate_job_token().size() == 64);
  CHECK(generate_job_token() != generate_job_token());
}

TEST_CASE("store: only clients with the job token get in, and rejects change no state") {
  TcpStoreServer server("127.0.0.1", 0, kToken);
  const int port = server.port();
  TcpStoreClient good("127.0.0.1", port, 5000ms, {}, kToken);
  good.set("k", "v");
  CHECK(good.get("k", 1000ms) == "v");
  REQUIRE(server.num_keys() == 1);

  SECTION("a client with another token fails naming the token check, and never shows the token") {
    TcpStoreClient bad("127.0.0.1", port, 2000ms, {}, kWrongToken);
    try {
      bad.set("evil", "x");
      FAIL("a client with the wrong token was let in");
    } catch (const CommError& e) {
      std::string what = e.what();
      INFO(what);
      CHECK(what.find("job token") != std::string::npos);
      CHECK(what.find(kToken) == std::string::npos);
      CHECK(what.find(kWrongToken) == std::string::npos);
    }
    CHECK(server.num_keys() == 1);
  }

  SECTION("garbage, an HTTP request and a hello with a forged proof are closed, state untouched") {
    const int64_t before = server.rejected_connections();
    {
      net::Socket s = raw_connect(port);
      const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
      net::send_all(s.fd(), http.data(), http.size(), net::Clock::now() + 2s, "store");
      CHECK(closed_by_peer(s.fd()));
    }
    {
      net::Socket s = raw_connect(port);
      std::string junk(4096, '\0');
      for (size_t i = 0; i < junk.size(); ++i) junk[i] = char(i * 2654435761u >> 13);
      net::send_all(s.fd(), junk.data(), junk.size(), net::Clock::now() + 2s, "store");
      CHECK(closed_by_peer(s.fd()));
    }
    {
      // Correct framing, wrong proof, and a set request right behind it: the set must
      // never be executed.
      net::Socket s = raw_connect(port);
      const std::string hello = raw_store_hello('n');
      net::send_all(s.fd(), hello.data(), hello.size(), net::Clock::now() + 2s, "store");
      char theirs[store_proto::kAuthHelloBytes];
      net::recv_all(s.fd(), theirs, sizeof theirs, net::Clock::now() + 2s, "store");
      std::string transcript = hello + std::string(theirs, sizeof theirs);
      crypto::Mac forged = handshake_proof(kWrongToken, store_proto::kClientProofLabel, transcript);
      std::string msg(reinterpret_cast<const char*>(forged.data()), forged.size());
      std::string body;
      wire::put_u8(body, store_proto::kSet);
      wire::put_str(body, "evil");
      wire::put_str(body, "x");
      wire::put_u32(msg, store_proto::kMagic);
      wire::put_u32(msg, uint32_t(body.size()));
      msg += body;
      net::send_all(s.fd(), msg.data(), msg.size(), net::Clock::now() + 2s, "store");
      CHECK(closed_by_peer(s.fd()));
    }
    wait_for([&] { return server.rejected_connections() >= before + 3; });
    CHECK(server.rejected_connections() == before + 3);
    CHECK(server.num_keys() == 1);
    CHECK_FALSE(good.check("evil"));
    // The same raw path with the right proof does get in: the forged case failed for
    // the proof alone. The server proves only after the client did, and then every
    // message travels in records.
    net::Socket s = raw_connect(port);
    const std::string hello = raw_store_hello('m');
    net::send_all(s.fd(), hello.data(), hello.size(), net::Clock::now() + 2s, "store");
    char theirs[store_proto::kAuthHelloBytes];
    net::recv_all(s.fd(), theirs, sizeof theirs, net::Clock::now() + 2s, "store");
    std::string transcript = hello + std::string(theirs, sizeof theirs);
    CHECK_FALSE(readable_within(s.fd(), 300ms));  // nothing computed from the token yet
    crypto::Mac proof = handshake_proof(kToken, store_proto::kClientProofLabel, transcript);
    net::send_all(s.fd(), proof.data(), proof.size(), net::Clock::now() + 2s, "store");
    unsigned char server_proof[store_proto::kAuthProofBytes];
    net::recv_all(s.fd(), server_proof, sizeof server_proof, net::Clock::now() + 2s, "store");
    CHECK(check_handshake_proof(kToken, store_proto::kServerProofLabel, transcript, server_proof));
    const auto server_hello = store_proto::decode_auth_hello(std::string_view(theirs, sizeof theirs));
    net::RecordChannel rec(*net::make_session(
        {kToken, transcript, store_proto::kClientKeyLabel, store_proto::kServerKeyLabel, true, true,
         crypto::agree_cipher(crypto::preferred_cipher(), crypto::Cipher(server_hello.cipher))},
        s.fd()));
    std::string body;
    wire::put_u8(body, store_proto::kSet);
    wire::put_str(body, "legit");
    wire::put_str(body, "y");
    const std::string msg = store_proto::store_message(body);
    rec.writer.seal(msg.data(), msg.size());
    rec.writer.write_all(s.fd(), net::Clock::now() + 2s, "store");
    CHECK(good.get("legit", 2000ms) == "y");
    // The same message again, in clear: not a record of this connection, so it is cut off.
    net::send_all(s.fd(), msg.data(), msg.size(), net::Clock::now() + 2s, "store");
    CHECK(closed_by_peer(s.fd()));
  }
}

namespace {

// Rank 0's store view in the mesh test: holds back its reads of peers' addresses until
// the attacker is done, so the attack reaches rank 1 strictly before rank 0 does.
class GatedStore : public Store {
 public:
  GatedStore(Store& inner, std::atomic<bool>& open) : inner_(inner), open_(open) {}
  void set(const std::string& k, const std::string& v) override { inner_.set(k, v); }
  std::string get(const std::string& k, Millis t) override {
    if (k.find("/addr/") != std::string::npos)
      while (!open_.load()) std::this_thread::sleep_for(5ms);
    return inner_.get(k, t);
  }
  int64_t add(const std::string& k, int64_t d) override { return inner_.add(k, d); }
  void wait(const std::vector<std::string>& k, Millis t) override { inner_.wait(k, t); }
  bool check(const std::string& k) override { return inner_.check(k); }

 private:
  Store& inner_;
  std::atomic<bool>& open_;
};

tcp::MeshConfig mesh_config(int rank, const std::string& token, Millis timeout) {
  tcp::MeshConfig c;
  c.rank = rank;
  c.world = 2;
  c.listen_host = "127.0.0.1";
  c.prefix = "tcp/0";
  c.comm_id = 0;
  c.token = token;
  c.timeout = timeout;
  c.ctx = ErrorContext{rank, 2, "tcp", "rendezvous", -1, -1};
  return c;
}

}  // namespace

TEST_CASE("mesh: an attacker who knows the job id but not the token is dropped; the mesh still forms") {
  TcpStoreServer server("127.0.0.1", 0, kToken);
  TcpStoreClient s0("127.0.0.1", server.port(), 10000ms, {}, kToken);
  TcpStoreClient s1("127.0.0.1", server.port(), 10000ms, {}, kToken);
  TcpStoreClient spy("127.0.0.1", server.port(), 10000ms, {}, kToken);  // worst case: store readable
  std::atomic<bool> open{false};
  GatedStore gated(s0, open);
  tcp::Mesh m0, m1;
  std::thread r0([&] { m0 = tcp::build_mesh(gated, mesh_config(0, kToken, 10000ms)); });
  std::thread r1([&] { m1 = tcp::build_mesh(s1, mesh_config(1, kToken, 10000ms)); });

  bool attacker_closed = false;
  std::string addr = spy.get("tcp/0/addr/1", 5000ms);
  uint64_t job = std::stoull(spy.get("tcp/0/job", 5000ms));
  {
    net::Socket s = raw_connect(std::stoi(addr.substr(addr.rfind(' ') + 1)));
    tcp::Hello h{tcp::HelloKind::hello, 0, 2, job, 0};
    unsigned char out[tcp::kHelloBytes];
    tcp::encode_hello(h, out);
    net::send_all(s.fd(), out, sizeof out, net::Clock::now() + 2s, "rank 1");
    unsigned char in[tcp::kHelloBytes + tcp::kProofBytes];
    net::recv_all(s.fd(), in, sizeof in, net::Clock::now() + 2s, "rank 1");  // the ack: we got this far
    unsigned char forged[tcp::kProofBytes];
    std::memset(forged, 0x5a, sizeof forged);
    net::send_all(s.fd(), forged, sizeof forged, net::Clock::now() + 2s, "rank 1");
    attacker_closed = closed_by_peer(s.fd());
  }
  open = true;
  r0.join();
  r1.join();
  CHECK(attacker_closed);
  CHECK(m1.rejected_connections == 1);
  CHECK(m0.peers[1].valid());
  CHECK(m1.peers[0].valid());
}

TEST_CASE("mesh: ranks with different tokens fail with a clear error that shows neither token") {
  TcpStoreServer server("127.0.0.1", 0, kToken);
  TcpStoreClient s0("127.0.0.1", server.port(), 10000ms, {}, kToken);
  TcpStoreClient s1("127.0.0.1", server.port(), 10000ms, {}, kToken);
  std::string e0, e1;
  std::thread r0([&] {
    try {
      tcp::build_mesh(s0, mesh_config(0, kToken, 3000ms));
    } catch (const std::exception& e) {
      e0 = e.what();
    }
  });
  std::thread r1([&] {
    try {
      tcp::build_mesh(s1, mesh_config(1, kWrongToken, 3000ms));
    } catch (const std::exception& e) {
      e1 = e.what();
    }
  });
  r0.join();
  r1.join();
  INFO("rank 0: " << e0 << "\nrank 1: " << e1);
  CHECK(e0.find("job token check") != std::string::npos);
  CHECK(e0.find("(peer 1)") != std::string::npos);
  CHECK(e1.find("ranks [0] did not connect") != std::string::npos);
  for (const auto& e : {e0, e1}) {
    CHECK(e.find(kToken) == std::string::npos);
    CHECK(e.find(kWrongToken) == std::string::npos);
  }
}

TEST_CASE("mesh: 300 idle connections held against a rank do not keep a real rank out") {
  // Before: past 256 connections not through the handshake, the newest was dropped: the
  // real rank's dial, once the idle ones filled the slots.
  TcpStoreServer server("127.0.0.1", 0, kToken);
  TcpStoreClient s0("127.0.0.1", server.port(), 10000ms, {}, kToken);
  TcpStoreClient s1("127.0.0.1", server.port(), 10000ms, {}, kToken);
  TcpStoreClient spy("127.0.0.1", server.port(), 10000ms, {}, kToken);
  std::atomic<bool> open{false};
  GatedStore gated(s0, open);
  tcp::Mesh m0, m1;
  std::string e0, e1;
  std::thread r0([&] {
    try {
      m0 = tcp::build_mesh(gated, mesh_config(0, kToken, 10000ms));
    } catch (const std::exception& e) {
      e0 = e.what();
    }
  });
  std::thread r1([&] {
    try {
      m1 = tcp::build_mesh(s1, mesh_config(1, kToken, 10000ms));
    } catch (const std::exception& e) {
      e1 = e.what();
    }
  });
  const std::string addr = spy.get("tcp/0/addr/1", 5000ms);
  std::vector<net::Socket> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(raw_connect(std::stoi(addr.substr(addr.rfind(' ') + 1))));
  std::this_thread::sleep_for(300ms);  // rank 1 has accepted them all
  open = true;
  r0.join();
  r1.join();
  INFO("rank 0: " << e0 << "\nrank 1: " << e1);
  CHECK(m0.peers[1].valid());
  CHECK(m1.peers[0].valid());
  CHECK(m1.rejected_connections >= 300 - 64);  // idle ones made room
}

TEST_CASE("job token: weak tokens are refused; a job reachable from other hosts does not run open") {
  // The estimate: length x Shannon entropy of the characters.
  CHECK(token_entropy_bits(std::string(40, 'a')) == 0);
  CHECK(token_entropy_bits("abababababababababababab") == Approx(24));
  CHECK(token_entropy_bits(generate_job_token()) > 200);
  ::setenv("COMM_JOB_TOKEN", "0000000000000000000001", 1);  // 22 characters, ~4 bits
  CHECK_THROWS_WITH(job_token_from_env(), Catch::Contains("bits of entropy") && !Catch::Contains("00000001"));
  ::setenv("COMM_JOB_TOKEN", kToken.c_str(), 1);
  CHECK(job_token_from_env() == kToken);
  ::unsetenv("COMM_JOB_TOKEN");

  CHECK(network_exposure("127.0.0.1", "127.0.0.1").empty());
  CHECK(network_exposure("10.0.0.1", "127.0.0.1") == "MASTER_ADDR 10.0.0.1 is not a loopback address");
  CHECK(network_exposure("127.0.0.1", "192.0.2.7").find("listen on 192.0.2.7") != std::string::npos);
  const std::string exposed = network_exposure("10.0.0.1", "10.0.0.1");
  CHECK(open_job_refusal(kToken, exposed).empty());  // a secret: fine
  CHECK(open_job_refusal("", "").empty());           // loopback only: may run (with a warning)
  const std::string refusal = open_job_refusal("", exposed);
  CHECK(refusal.find("refusing to run open") != std::string::npos);
  CHECK(refusal.find("COMM_RUN_OPEN=1") != std::string::npos);
  CHECK(refusal.find("MASTER_ADDR 10.0.0.1") != std::string::npos);
  ::setenv("COMM_RUN_OPEN", "1", 1);
  CHECK(open_job_refusal("", exposed).empty());  // opted out by name
  ::unsetenv("COMM_RUN_OPEN");
}
