#include "backends/tcp/mesh.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <cerrno>
#include <exception>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "backends/tcp/frame.h"
#include "comm/net/hmac.h"
#include "comm/net/secure_session.h"
#include "comm/store/job_token.h"
#include "comm/net/log.h"
#include "comm/store/rendezvous.h"
#include "comm/wire.h"

namespace dpt::tcp {

using net::Clock;

namespace {

// Connections not yet through the handshake, in all and from one address. Beyond
// either, the oldest that has sent nothing yet (else the oldest) makes room: a real
// rank sends its hello at once, so a flood of idle connections cannot crowd it out.
constexpr size_t kMaxPendingConnections = 256;
constexpr size_t kMaxPendingPerAddress = 64;

uint64_t random_job_id() {
  std::random_device rd;
  uint64_t id = (uint64_t(rd()) << 32) ^ rd();
  return id ? id : 1;
}

std::vector<std::string> split_addr(const std::string& v) {
  auto sp = v.rfind(' ');
  if (sp == std::string::npos) return {v};
  return {v.substr(0, sp), v.substr(sp + 1)};
}

void tune(int fd) {
  net::set_nodelay(fd);
  net::set_buffer_sizes(fd, 8 << 20);
  // Keepalive finds a peer whose host vanished. A peer on this host that dies has its
  // connections closed by this kernel, so same-host connections (P-1 per rank when the
  // ranks share memory) get none: 512 ranks on one host idle 10 s sent probes on 130,816
  // connections every 2 s, loopback's backlog dropped them, and connections failed with
  // ETIMEDOUT ("Connection timed out") on a healthy job.
  if (!net::peer_has_our_address(fd)) net::set_keepalive(fd);
}

// A not yet authenticated incoming connection: its hello, then (once our ack and proof
// are sent) the connecting rank's proof.
struct Pending {
  net::Socket sock;
  std::string from;
  std::string from_host;  // numeric, for the per-address cap and the hosts check
  unsigned char in[kHelloBytes + kProofBytes];
  size_t got = 0;
  int rank = -1;           // claimed in its hello (trusted only after the proof)
  std::string transcript;  // hello || ack, once the ack is sent
  bool encrypt = true;     // agreed from both hellos (records, frame.h)
  crypto::Cipher cipher = crypto::Cipher::aes256_gcm;
  Clock::time_point since;
};

std::string bytes(const unsigned char* p, size_t n) { return std::string(reinterpret_cast<const char*>(p), n); }

}  // namespace

// Accepts until hooks.done(). During the build it runs on its own thread while this rank
// connects to the higher ones; afterwards on the connector's thread (connector.h).
void accept_lower_ranks(net::Listener& listener, const MeshConfig& cfg, uint64_t job_id, AcceptHooks& hooks,
                        Clock::time_point deadline) {
  std::vector<Pending> pending;
  net::set_nonblocking(listener.sock.fd(), true);
  auto reject = [&](Pending& p, const std::string& why) {
    ++hooks.rejected;
    log::warn("tcp rendezvous: closing connection from {}: {}", p.from, why);
    p.sock.close();
  };
  // The hosts of this job's ranks, where the addresses are known: anything else is refused
  // before it costs a slot. Every rank's, not only the lower ranks' (the ones that dial):
  // a higher rank waiting for this one probes its listener (liveness_probe.h), and such a
  // probe from a host with no lower rank was refused with a warning on every run across
  // hosts (the probe still read it as alive, but the log filled with false alarms).
  std::set<std::string> job_hosts;
  for (int r = 0; size_t(r) < cfg.addresses.size(); ++r) {
    if (r == cfg.rank) continue;
    const std::string& a = cfg.addresses[size_t(r)];
    job_hosts.insert(a.substr(0, a.rfind(' ')));
  }
  // Closes the oldest pending connection (of `host` when given) that has sent nothing,
  // else the oldest one.
  auto make_room = [&](const std::string& host) {
    Pending* victim = nullptr;
    for (auto& q : pending) {
      if (!q.sock.valid() || (!host.empty() && q.from_host != host)) continue;
      if (!victim || (q.got == 0 && victim->got > 0) || ((q.got == 0) == (victim->got == 0) && q.since < victim->since))
        victim = &q;
    }
    if (victim) reject(*victim, "closed to make room for newer connections (too many not through the handshake)");
  };
  while (!hooks.done()) {
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 0; r < cfg.rank; ++r)
        if ((cfg.eager.empty() || cfg.eager[size_t(r)]) && !hooks.connected(r)) missing.push_back(r);
      throw TimeoutError(cfg.ctx, "ranks " + format_rank_list(missing) + " did not connect to this rank at " +
                                      listener.bound.str() + " (firewall, or wrong COMM_TCP_IFNAME/COMM_TCP_ADDR?)");
    }
    std::vector<pollfd> fds;
    fds.push_back({listener.sock.fd(), POLLIN, 0});
    for (auto& p : pending) fds.push_back({p.sock.fd(), POLLIN, 0});
    const size_t polled = pending.size();  // fds[1..polled]; connections accepted below come after
    int wait_ms = 100;
    if (hooks.wake_fd >= 0) {
      // Asleep until something happens: a pending connection's 10 s limit is checked
      // each second, the deadline when it comes.
      wait_ms = pending.empty() ? -1 : 1000;
      if (deadline != Clock::time_point::max()) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count() + 1;
        wait_ms = int(wait_ms < 0 ? std::min<int64_t>(left, INT32_MAX) : std::min<int64_t>(left, wait_ms));
      }
      fds.push_back({hooks.wake_fd, POLLIN, 0});
    }
    int rc = ::poll(fds.data(), fds.size(), wait_ms);
    if (rc < 0 && errno != EINTR) throw net::SocketError("poll: " + net::errno_string(errno), errno);
    if (rc > 0 && hooks.wake_fd >= 0 && (fds.back().revents & POLLIN)) {
      uint64_t drained = 0;
      (void)!::read(hooks.wake_fd, &drained, sizeof drained);
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      for (;;) {
        net::Endpoint from;
        net::Socket s = net::accept_until(listener.sock.fd(), Clock::now(), &from);
        if (!s.valid()) break;
        const std::string host = from.host();
        if (!job_hosts.empty() && !job_hosts.count(host)) {
          ++hooks.rejected;
          log::warn("tcp rendezvous: closing connection from {}: not an address of this job's ranks", from.str());
          continue;
        }
        size_t from_same = 0, live = 0;
        for (const auto& q : pending)
          if (q.sock.valid()) {
            ++live;
            from_same += q.from_host == host;
          }
        if (live >= kMaxPendingConnections || from_same >= kMaxPendingPerAddress)
          make_room(live >= kMaxPendingConnections ? std::string() : host);
        net::set_nonblocking(s.fd(), true);
        Pending p;
        p.sock = std::move(s);
        p.from = from.str();
        p.from_host = host;
        p.since = Clock::now();
        pending.push_back(std::move(p));
      }
    }
    for (size_t i = 0; i < polled && rc > 0; ++i) {
      Pending& p = pending[i];
      if (!fds[i + 1].revents || !p.sock.valid()) continue;
      const size_t want = p.transcript.empty() ? kHelloBytes : kHelloBytes + kProofBytes;
      ssize_t r = ::recv(p.sock.fd(), p.in + p.got, want - p.got, 0);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK)) {
        reject(p, "closed before completing the handshake");
        continue;
      }
      if (r < 0) continue;
      p.got += static_cast<size_t>(r);
      if (p.got >= 4 && p.transcript.empty() && wire::load_u32(p.in) == kProbeMagic) {
        p.sock.close();  // a rank checking that this process lives (liveness_probe.h)
        continue;
      }
      if (p.got < want) {
        // Reject garbage as soon as its first bytes show it is not a hello.
        if (p.got >= 4 && wire::load_u32(p.in) != kHelloMagic) reject(p, "not a dpt hello (bad magic)");
        continue;
      }
      try {
        if (p.transcript.empty()) {
          // Step 1: a hello that fits this job; answer with our ack and proof.
          Hello h = decode_hello(p.in);
          if (h.kind != HelloKind::hello) throw FrameError("expected a hello, got an ack");
          if (h.job_id != job_id || h.comm_id != cfg.comm_id)
            throw FrameError("hello from a different job or communicator (stale process of an earlier run?)");
          if (h.world != cfg.world)
            throw FrameError(fmt::format("peer has world size {}, this rank {}", h.world, cfg.world));
          if (h.rank < 0 || h.rank >= cfg.rank)
            throw FrameError(fmt::format("rank {} may not connect to rank {} (only lower ranks connect)", h.rank, cfg.rank));
          if (hooks.connected(h.rank)) throw FrameError(fmt::format("rank {} connected twice", h.rank));
          Hello ack{HelloKind::ack, cfg.rank, cfg.world, job_id, cfg.comm_id};
          crypto::random_bytes(ack.nonce, sizeof ack.nonce);
          ack.encrypt = net::wants_encryption(p.sock.fd());
          ack.cipher = static_cast<uint8_t>(crypto::preferred_cipher());
          p.encrypt = ack.encrypt || h.encrypt;
          p.cipher = crypto::agree_cipher(crypto::Cipher(ack.cipher), crypto::Cipher(h.cipher));
          unsigned char buf[kHelloBytes + kProofBytes];
          encode_hello(ack, buf);
          p.transcript = bytes(p.in, kHelloBytes) + bytes(buf, kHelloBytes);
          crypto::Mac proof = handshake_proof(cfg.token, kAckProofLabel, p.transcript);
          std::memcpy(buf + kHelloBytes, proof.data(), kProofBytes);
          net::send_all(p.sock.fd(), buf, sizeof buf, std::min(deadline, Clock::now() + std::chrono::seconds(10)),
                        p.from);
          p.rank = h.rank;
          continue;
        }
        // Step 3: the connecting rank's proof; only now does the connection count.
        if (!check_handshake_proof(cfg.token, kHelloProofLabel, p.transcript, p.in + kHelloBytes))
          throw FrameError("failed the job token check (another job, or a different COMM_JOB_TOKEN)");
        if (hooks.connected(p.rank)) throw FrameError(fmt::format("rank {} connected twice", p.rank));
        net::set_nonblocking(p.sock.fd(), false);
        tune(p.sock.fd());
        p.sock.set_session(net::make_session(
            {cfg.token, p.transcript, kDialKeyLabel, kAcceptKeyLabel, /*dialing=*/false, p.encrypt, p.cipher},
            p.sock.fd()));
        hooks.deliver(p.rank, std::move(p.sock));
      } catch (const FrameError& e) {
        reject(p, e.what());
      } catch (const net::SocketError& e) {
        reject(p, e.what());
      }
    }
    // Drop closed entries, and connections that sat silent too long (a scanner that
    // connects and says nothing must not hold a slot forever).
    auto now = Clock::now();
    for (auto& p : pending)
      if (p.sock.valid() && now - p.since > std::chrono::seconds(10)) reject(p, "no hello within 10 s");
    std::erase_if(pending, [](const Pending& p) { return !p.sock.valid(); });
  }
}

std::vector<std::string> gather_addresses(Store& store, const MeshConfig& cfg, Millis timeout) {
  std::vector<std::string> out(size_t(cfg.world));
  if (cfg.rank == 0) {
    std::string all;
    for (int r = 0; r < cfg.world; ++r) {
      out[size_t(r)] = store.get(cfg.prefix + "/addr/" + std::to_string(r), timeout);
      all += (r ? "\n" : "") + out[size_t(r)];
    }
    store.set(cfg.prefix + "/addrs", all);
    return out;
  }
  const std::string all = store.get(cfg.prefix + "/addrs", timeout);
  size_t at = 0;
  for (int r = 0; r < cfg.world; ++r) {
    const size_t end = all.find('\n', at);
    if ((end == std::string::npos) != (r == cfg.world - 1))
      throw MismatchError(cfg.ctx, "the store's address list (" + cfg.prefix + "/addrs) does not hold " +
                                       std::to_string(cfg.world) + " addresses: another version of dpt on rank 0?");
    out[size_t(r)] = all.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end + 1;
  }
  return out;
}

net::Socket dial_peer(Store& store, const MeshConfig& cfg, uint64_t job_id, int peer, Clock::time_point deadline,
                      Clock::time_point connect_by) {
  {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    auto addr = split_addr(size_t(peer) < cfg.addresses.size()
                               ? cfg.addresses[size_t(peer)]
                               : store.get(cfg.prefix + "/addr/" + std::to_string(peer), std::max(left, Millis(1))));
    if (addr.size() != 2) throw MismatchError(cfg.ctx, "malformed address of rank " + std::to_string(peer) + " in the store");
    std::string what = fmt::format("rank {} at {}:{}", peer, addr[0], addr[1]);
    net::Socket s;
    try {
      s = net::connect_with_retry(addr[0], std::stoi(addr[1]), std::min(deadline, connect_by), cfg.family);
      Hello hello{HelloKind::hello, cfg.rank, cfg.world, job_id, cfg.comm_id};
      crypto::random_bytes(hello.nonce, sizeof hello.nonce);
      hello.encrypt = net::wants_encryption(s.fd());
      hello.cipher = static_cast<uint8_t>(crypto::preferred_cipher());
      unsigned char out[kHelloBytes];
      encode_hello(hello, out);
      net::send_all(s.fd(), out, sizeof out, deadline, what);
      unsigned char in[kHelloBytes + kProofBytes];
      net::recv_all(s.fd(), in, sizeof in, deadline, what);
      Hello ack = decode_hello(in);
      if (ack.kind != HelloKind::ack || ack.rank != peer || ack.world != cfg.world || ack.job_id != job_id ||
          ack.comm_id != cfg.comm_id)
        throw FrameError("its reply does not match (rank " + std::to_string(ack.rank) + ", world " +
                         std::to_string(ack.world) + "): a process of another job on that port?");
      const std::string transcript = bytes(out, kHelloBytes) + bytes(in, kHelloBytes);
      if (!check_handshake_proof(cfg.token, kAckProofLabel, transcript, in + kHelloBytes))
        throw FrameError("it failed the job token check (a process of another job on that port, or a different "
                         "COMM_JOB_TOKEN)");
      crypto::Mac proof = handshake_proof(cfg.token, kHelloProofLabel, transcript);
      net::send_all(s.fd(), proof.data(), proof.size(), deadline, what);
      s.set_session(net::make_session({cfg.token, transcript, kDialKeyLabel, kAcceptKeyLabel, /*dialing=*/true,
                                       hello.encrypt || ack.encrypt,
                                       crypto::agree_cipher(crypto::Cipher(hello.cipher), crypto::Cipher(ack.cipher))},
                                      s.fd()));
    } catch (const net::SocketTimeout& e) {
      ErrorContext c = cfg.ctx;
      c.peer = peer;
      throw TimeoutError(c, std::string("connecting to ") + what + ": " + e.what());
    } catch (const net::SocketClosed& e) {
      ErrorContext c = cfg.ctx;
      c.peer = peer;
      throw PeerError(c, what + " closed the connection during the hello (it rejected us: different job, "
                                "or it exited?): " + e.what());
    } catch (const std::exception& e) {
      ErrorContext c = cfg.ctx;
      c.peer = peer;
      throw PeerError(c, "connecting to " + what + ": " + e.what());
    }
    tune(s.fd());
    return s;
  }
}

namespace {

void connect_higher_ranks(Store& store, const MeshConfig& cfg, uint64_t job_id, Mesh& mesh,
                          Clock::time_point deadline) {
  for (int peer = cfg.rank + 1; peer < cfg.world; ++peer)
    if (cfg.eager.empty() || cfg.eager[size_t(peer)]) mesh.peers[peer] = dial_peer(store, cfg, job_id, peer, deadline);
}

}  // namespace

Mesh build_mesh(Store& store, const MeshConfig& cfg) {
  ErrorContext ctx = cfg.ctx;
  ctx.op = "rendezvous";
  const auto deadline = Clock::now() + cfg.timeout;
  Mesh mesh;
  mesh.peers.resize(static_cast<size_t>(cfg.world));

  net::Listener listener;
  try {
    listener = net::listen_on(cfg.listen_host, 0, cfg.family);
  } catch (const net::SocketError& e) {
    throw UsageError(ctx, std::string(e.what()) + " (set COMM_TCP_ADDR or COMM_TCP_IFNAME to a local address)");
  }
  auto wall_ms = [] {
    return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  mesh.arrived_at_ms = wall_ms();
  if (cfg.rank == 0) store.set(cfg.prefix + "/job", std::to_string(random_job_id()));
  const std::string addr_key = cfg.prefix + "/addr/" + std::to_string(cfg.rank);
  try {
    store.set(addr_key, listener.bound.host() + " " + std::to_string(listener.port()));
  } catch (const UsageError&) {
    // The tcp store writes a rank's address once: another process published it first.
    if (store.check(addr_key)) report_duplicate_rank(store, cfg.prefix, cfg.rank, ctx);
    throw;
  }
  if (cfg.publish_more) cfg.publish_more();
  mesh.published_at_ms = wall_ms();
  rendezvous(store, cfg.prefix, cfg.rank, cfg.world, cfg.timeout, cfg.ctx, cfg.gone);
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  mesh.job_id = std::stoull(store.get(cfg.prefix + "/job", std::max(left, Millis(1))));
  mesh.joined_at_ms = wall_ms();

  MeshConfig c = cfg;
  c.ctx = ctx;
  if (cfg.decide_eager) c.eager = cfg.decide_eager(c.addresses);
  mesh.eager_decided_at_ms = wall_ms();
  std::exception_ptr accept_error;
  std::atomic<bool> stop{false};  // connecting failed: the acceptor need not wait on
  int expected = 0;               // eager lower ranks still to connect
  for (int r = 0; r < cfg.rank; ++r) expected += c.eager.empty() || c.eager[size_t(r)];
  AcceptHooks hooks;
  hooks.connected = [&](int r) { return mesh.peers[size_t(r)].valid(); };
  hooks.deliver = [&](int r, net::Socket s) {
    // A lower rank may connect on demand before this rank finished building: keep it.
    if (c.eager.empty() || c.eager[size_t(r)]) --expected;
    mesh.peers[size_t(r)] = std::move(s);
  };
  hooks.done = [&] { return expected <= 0 || stop.load(); };
  std::thread acceptor([&] {
    try {
      accept_lower_ranks(listener, c, mesh.job_id, hooks, deadline);
    } catch (...) {
      accept_error = std::current_exception();
    }
  });
  std::exception_ptr connect_error;
  try {
    connect_higher_ranks(store, c, mesh.job_id, mesh, deadline);
  } catch (...) {
    connect_error = std::current_exception();
    stop = true;
  }
  acceptor.join();
  mesh.rejected_connections = hooks.rejected;
  if (connect_error) std::rethrow_exception(connect_error);
  if (accept_error) std::rethrow_exception(accept_error);
  mesh.listener = std::move(listener);
  return mesh;
}

}  // namespace dpt::tcp
