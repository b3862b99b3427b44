// A man in the middle between two ranks of the tcp backend: rank 0 is told a relay's
// address for rank 1 (as an attacker who can redirect traffic would arrange), and the
// relay passes the handshake through, then attacks the records of a 256 KiB data frame
// from rank 0 to rank 1: it flips one byte, replays a record, or injects an abort frame
// that blames another rank. Each must end the receive with an error that names the
// connection, the abort must reach rank 0 too, and the receive buffer must hold only
// bytes rank 0 sent or its old contents, never a tampered value. Run in both modes: the
// records encrypted, and authenticated only (the bytes in clear, what the relay flips
// then is the float itself).
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/tcp/frame.h"
#include "backends/tcp/tcp_backend.h"
#include "comm/communicator.h"
#include "comm/net/record_stream.h"
#include "comm/net/socket.h"
#include "comm/store/tcp_store.h"

using namespace dpt;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "mitm-test-token-0123456789abcdef";
const std::string kPrefix = "mitm";

// Rank 0's view of the store: rank 1's address is the relay's.
class RedirectStore : public Store {
 public:
  RedirectStore(std::shared_ptr<Store> inner, std::string relay) : inner_(std::move(inner)), relay_(std::move(relay)) {}
  void set(const std::string& k, const std::string& v) override { inner_->set(k, v); }
  std::string get(const std::string& k, Millis t) override {
    if (k == kPrefix + "/addr/1") {
      inner_->get(k, t);  // wait until rank 1 published, then lie
      return relay_;
    }
    return inner_->get(k, t);
  }
  int64_t add(const std::string& k, int64_t d) override { return inner_->add(k, d); }
  void wait(const std::vector<std::string>& k, Millis t) override { inner_->wait(k, t); }
  bool check(const std::string& k) override { return inner_->check(k); }

 private:
  std::shared_ptr<Store> inner_;
  std::string relay_;
};

enum class Attack { flip, replay, inject };

bool read_exact(int fd, char* p, size_t n) {
  while (n) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}
bool write_exact(int fd, const char* p, size_t n) {
  while (n) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Accepts rank 0, dials rank 1, forwards both ways; on the way up (rank 0 -> rank 1)
// it parses the records after the handshake and attacks the first one of a full
// record's size (the data frame's; the communicator's own frames are small).
class Relay {
 public:
  explicit Relay(Attack attack) : attack_(attack), listener_(net::listen_on("127.0.0.1", 0)) {}
  ~Relay() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  std::string address() const { return "127.0.0.1 " + std::to_string(listener_.port()); }
  bool attacked() const { return attacked_.load(); }

  void start(std::shared_ptr<Store> store) {
    threads_.emplace_back([this, store] {
      net::Socket down = net::accept_until(listener_.sock.fd(), net::Clock::now() + 20s);
      if (!down.valid()) return;
      const std::string real = store->get(kPrefix + "/addr/1", 20000ms);
      net::Socket up = net::connect_with_retry(real.substr(0, real.find(' ')), std::stoi(real.substr(real.find(' ') + 1)),
                                               net::Clock::now() + 10s);
      const int d = down.fd(), u = up.fd();
      std::thread back([d, u] {  // rank 1 -> rank 0, untouched
        char buf[65536];
        for (;;) {
          const ssize_t r = ::recv(u, buf, sizeof buf, 0);
          if (r <= 0 || !write_exact(d, buf, size_t(r))) break;
        }
        ::shutdown(d, SHUT_WR);
      });
      forward_up(d, u);
      ::shutdown(u, SHUT_WR);
      back.join();
    });
  }

 private:
  void forward_up(int from, int to) {
    // The dialer's hello, then (after the acceptor's ack) its proof: passed as they are.
    for (size_t n : {tcp::kHelloBytes, tcp::kProofBytes}) {
      std::string hs(n, '\0');
      if (!read_exact(from, hs.data(), hs.size()) || !write_exact(to, hs.data(), hs.size())) return;
    }
    for (;;) {
      char head[4];
      if (!read_exact(from, head, 4)) return;
      uint32_t len;
      std::memcpy(&len, head, 4);
      std::string rec(head, 4);
      rec.resize(net::kRecordOverhead + len);
      if (!read_exact(from, rec.data() + 4, rec.size() - 4)) return;
      if (!attacked_ && len == net::kMaxRecordPlain) {
        attacked_ = true;
        if (attack_ == Attack::flip) {
          rec[4 + 1000] = static_cast<char>(rec[4 + 1000] ^ 0x40);  // inside a float of the payload
        } else if (attack_ == Attack::replay) {
          if (!write_exact(to, rec.data(), rec.size())) return;  // once more below
        } else {
          // An abort frame blaming rank 7, sealed with nothing (the relay has no key):
          // framed as a record of its size with a made-up tag.
          const std::string reason = "rank 7 ran out of memory";
          unsigned char h[tcp::kHeaderBytes];
          tcp::encode_header({tcp::FrameType::abort, 0, reason.size()}, h);
          std::string frame(reinterpret_cast<char*>(h), sizeof h);
          frame += reason;
          std::string fake(4, '\0');
          const uint32_t flen = uint32_t(frame.size());
          std::memcpy(fake.data(), &flen, 4);
          fake += frame + std::string(16, '\x42');
          if (!write_exact(to, fake.data(), fake.size())) return;
        }
      }
      if (!write_exact(to, rec.data(), rec.size())) return;
    }
  }

  Attack attack_;
  net::Listener listener_;
  std::vector<std::thread> threads_;
  std::atomic<bool> attacked_{false};
  std::atomic<bool> stop_{false};
};

struct Outcome {
  std::string rank1_error, rank0_error;
  std::vector<float> received;
};

Outcome run_attack(Attack attack) {
  TcpStoreServer server("127.0.0.1", 0, kToken);
  auto store = std::make_shared<TcpStoreClient>("127.0.0.1", server.port(), 20000ms, ErrorContext{}, kToken);
  auto store1 = std::make_shared<TcpStoreClient>("127.0.0.1", server.port(), 20000ms, ErrorContext{}, kToken);
  Relay relay(attack);
  relay.start(std::make_shared<TcpStoreClient>("127.0.0.1", server.port(), 20000ms, ErrorContext{}, kToken));
  auto redirected = std::make_shared<RedirectStore>(store, relay.address());
  CommOptions opts;
  opts.timeout = 15s;
  constexpr size_t kFloats = 64 * 1024;  // 256 KiB: several full records
  Outcome out;
  out.received.assign(kFloats, -7.0f);
  std::thread r0([&] {
    TcpStoreRendezvous rv{0, 2, redirected, kPrefix, 0, "127.0.0.1", kToken, 20000ms, {}};
    auto comm = create_tcp_communicator_in_store(rv, opts);
    std::vector<float> data(kFloats, 1.0f);
    try {
      comm->send(make_buffer(data.data(), data.size()), 1, 5);
      float ack = 0;
      comm->recv(make_buffer(&ack, 1), 1, 6);  // never comes: rank 1's communicator failed
    } catch (const std::exception& e) {
      out.rank0_error = e.what();
    }
  });
  std::thread r1([&] {
    TcpStoreRendezvous rv{1, 2, store1, kPrefix, 0, "127.0.0.1", kToken, 20000ms, {}};
    auto comm = create_tcp_communicator_in_store(rv, opts);
    try {
      comm->recv(make_buffer(out.received.data(), out.received.size()), 0, 5);
      float ack = 1;
      comm->send(make_buffer(&ack, 1), 0, 6);
    } catch (const std::exception& e) {
      out.rank1_error = e.what();
    }
  });
  r0.join();
  r1.join();
  CHECK(relay.attacked());
  return out;
}

struct EnvVar {
  EnvVar(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~EnvVar() { ::unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST_CASE("mitm: a flipped byte, a replayed record and an injected abort frame each stop the job", "[mitm]") {
  EnvVar no_shm("COMM_TCP_SHM", "0");  // two ranks of one host: force their frames onto TCP
  for (const char* mode : {"1", "0"}) {
    EnvVar encrypt("COMM_TCP_ENCRYPT", mode);
    for (Attack attack : {Attack::flip, Attack::replay, Attack::inject}) {
      INFO("COMM_TCP_ENCRYPT=" << mode << ", attack " << int(attack));
      const Outcome o = run_attack(attack);
      INFO("rank 1: " << o.rank1_error << "\nrank 0: " << o.rank0_error);
      CHECK(o.rank1_error.find("failed its authentication check") != std::string::npos);
      CHECK(o.rank1_error.find("peer rank 0 (127.0.0.1:") != std::string::npos);  // the connection, named
      CHECK(o.rank1_error.find("rank 7") == std::string::npos);  // the injected blame is never believed
      CHECK(o.rank0_error.find("failed its authentication check") != std::string::npos);  // told via abort
      size_t other = 0;
      for (float v : o.received) other += (v != 1.0f && v != -7.0f);
      CHECK(other == 0);  // only what rank 0 sent, or what was there: no tampered value
    }
  }
}
