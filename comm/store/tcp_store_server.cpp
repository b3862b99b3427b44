// TcpStoreServer: one thread, poll() over the listener, a wake-up pipe and every client.
//
// Terms:
//   client  - one accepted connection with its input and output buffers.
//   waiter  - a parked get/wait request: its keys, the index of the first key still
//             missing, and a deadline. A waiter is filed under its first missing key
//             ("watchers"), so setting a key only looks at the waiters that need it.
//   auth    - a client's handshake stage (tcp_store_protocol.h): hello expected, proof
//             expected, or done. Until done, only handshake bytes are read, at most
//             kMaxUnauthBytes are buffered, and kAuthTimeout bounds the whole exchange, so
//             a scanner or a stray client costs one slot for a few seconds and changes
//             no key.
// A client with a parked request is not read from until the request is answered: one
// request at a time per connection keeps replies in order.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <thread>
#include <unordered_map>

#include "comm/store/job_token.h"
#include "comm/net/log.h"
#include "comm/store/tcp_store.h"
#include "comm/store/tcp_store_protocol.h"
#include "comm/store/tcp_store_request.h"
#include "comm/wire.h"

namespace dpt {

using namespace store_proto;
using net::Clock;

namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kMaxOutBytes = 64u << 20;  // a client that never reads its replies is dropped
constexpr size_t kMaxClients = 4096;
constexpr auto kAuthTimeout = std::chrono::seconds(10);

enum class Auth { hello, proof, done };

struct Client {
  net::Socket sock;
  std::string peer;
  std::string in;
  std::string out;
  size_t out_pos = 0;
  bool parked = false;  // has a waiter; do not parse more requests
  Auth auth = Auth::hello;
  std::string transcript;   // client hello || server challenge (without its proof)
  Clock::time_point since;  // accepted at
};

struct Waiter {
  uint64_t client = 0;
  Cmd cmd = kWait;
  std::vector<std::string> keys;
  size_t first_missing = 0;
  Clock::time_point deadline;
};

}  // namespace

struct TcpStoreServer::Impl {
  net::Listener listener;
  int wake_r = -1, wake_w = -1;
  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> rejected{0};
  std::atomic<int64_t> key_count{0};
  std::string token;

  std::unordered_map<std::string, std::string> data;
  std::map<uint64_t, Client> clients;
  uint64_t next_client = 1;
  std::map<uint64_t, Waiter> waiters;
  uint64_t next_waiter = 1;
  bool unparked = false;  // a waiter was answered: its client may have buffered requests
  std::unordered_map<std::string, std::vector<uint64_t>> watchers;

  void run();
  void accept_clients();
  bool read_client(uint64_t id, Client& c);   // false: drop the client
  bool write_client(Client& c);               // false: drop the client
  bool parse_requests(uint64_t id, Client& c);
  bool authenticate(Client& c);  // false: drop the client
  void drop_unauthenticated();
  void handle(uint64_t id, Client& c, StoreRequest req);  // req is validated already
  void send_reply(Client& c, const std::string& body) { c.out += store_message(body); }
  void park(uint64_t id, Client& c, Cmd cmd, std::vector<std::string> keys, uint32_t timeout_ms);
  // Advances a waiter past keys now present; answers it when complete. True if answered.
  bool advance(uint64_t wid);
  void answer(uint64_t wid, bool timed_out);
  void key_set(const std::string& key);
  void expire_waiters();
  void drop_client(uint64_t id);
  void pump();
  int poll_timeout_ms() const;
};

TcpStoreServer::TcpStoreServer(const std::string& host, int port, std::string token)
    : impl_(std::make_unique<Impl>()) {
  impl_->token = std::move(token);
  impl_->listener = net::listen_on(host, port);
  net::set_nonblocking(impl_->listener.sock.fd(), true);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw net::SocketError("pipe2: " + net::errno_string(errno), errno);
  impl_->wake_r = fds[0];
  impl_->wake_w = fds[1];
  impl_->thread = std::thread([this] { impl_->run(); });
}

TcpStoreServer::~TcpStoreServer() {
  impl_->stop = true;
  char b = 1;
  ssize_t ignored = ::write(impl_->wake_w, &b, 1);
  (void)ignored;
  if (impl_->thread.joinable()) impl_->thread.join();
  ::close(impl_->wake_r);
  ::close(impl_->wake_w);
}

int TcpStoreServer::port() const { return impl_->listener.port(); }
std::string TcpStoreServer::host() const { return impl_->listener.bound.host(); }
int64_t TcpStoreServer::rejected_connections() const { return impl_->rejected.load(); }
int64_t TcpStoreServer::num_keys() const { return impl_->key_count.load(); }

int TcpStoreServer::Impl::poll_timeout_ms() const {
  if (waiters.empty()) return 1000;
  auto next = Clock::time_point::max();
  for (const auto& [id, w] : waiters) next = std::min(next, w.deadline);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count() + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1000));
}

void TcpStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stop.load()) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_r, POLLIN, 0});
    fds.push_back({listener.sock.fd(), POLLIN, 0});
    for (auto& [id, c] : clients) {
      short ev = 0;
      if (!c.parked) ev |= POLLIN;
      if (c.out_pos < c.out.size()) ev |= POLLOUT;
      fds.push_back({c.sock.fd(), ev, 0});
      ids.push_back(id);
    }
    int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (rc < 0 && errno != EINTR) {
      log::error("store server: poll failed: {}", net::errno_string(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (stop.load()) break;
    if (rc > 0) {
      if (fds[1].revents & POLLIN) accept_clients();
      for (size_t i = 0; i < ids.size(); ++i) {
        short re = fds[i + 2].revents;
        if (!re) continue;
        auto it = clients.find(ids[i]);
        if (it == clients.end()) continue;
        bool ok = true;
        if (re & (POLLIN | POLLHUP | POLLERR)) ok = read_client(it->first, it->second);
        if (ok && (re & POLLOUT)) ok = write_client(it->second);
        if (!ok) drop_client(ids[i]);
      }
      if (fds[0].revents & POLLIN) {
        char buf[64];
        while (::read(wake_r, buf, sizeof buf) > 0) {
        }
      }
    }
    expire_waiters();
    drop_unauthenticated();
    pump();
    // Replies produced for other clients (a set waking waiters) are flushed eagerly.
    for (auto it = clients.begin(); it != clients.end();) {
      auto next = std::next(it);
      if (it->second.out_pos < it->second.out.size() && !write_client(it->second)) drop_client(it->first);
      it = next;
    }
  }
}

void TcpStoreServer::Impl::accept_clients() {
  for (;;) {
    net::Endpoint peer;
    peer.len = sizeof peer.addr;
    int fd = ::accept4(listener.sock.fd(), reinterpret_cast<sockaddr*>(&peer.addr), &peer.len,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        log::warn("store server: accept failed: {}", net::errno_string(errno));
      return;
    }
    net::Socket s(fd);
    if (clients.size() >= kMaxClients) {
      log::warn("store server: refusing {}: already {} clients", peer.str(), clients.size());
      continue;  // s closes
    }
    net::set_nodelay(fd);
    Client c;
    c.sock = std::move(s);
    c.peer = peer.str();
    c.since = Clock::now();
    clients.emplace(next_client++, std::move(c));
  }
}

bool TcpStoreServer::Impl::read_client(uint64_t id, Client& c) {
  char buf[kReadChunk];
  for (;;) {
    ssize_t r = ::recv(c.sock.fd(), buf, sizeof buf, 0);
    if (r > 0) {
      c.in.append(buf, static_cast<size_t>(r));
      if (!parse_requests(id, c)) return false;
      if (c.parked || static_cast<size_t>(r) < sizeof buf) return true;
      continue;
    }
    if (r == 0) return false;  // client closed: ordinary end of a session
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    return false;
  }
}

bool TcpStoreServer::Impl::write_client(Client& c) {
  while (c.out_pos < c.out.size()) {
    ssize_t w = ::send(c.sock.fd(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
    if (w > 0) {
      c.out_pos += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
  }
  return c.out.size() - c.out_pos <= kMaxOutBytes;
}

bool TcpStoreServer::Impl::authenticate(Client& c) {
  auto reject = [&](const char* why) {
    ++rejected;
    log::warn("store server: closing connection from {}: {}", c.peer, why);
    return false;
  };
  if (c.auth == Auth::hello) {
    const Scan hello = scan_auth_hello(c.in);
    if (hello.kind == Scan::reject) return reject(hello.reason.c_str());
    if (hello.kind == Scan::need_more) return true;
    c.transcript = c.in.substr(0, kAuthHelloBytes);
    c.in.erase(0, kAuthHelloBytes);
    crypto::Nonce nonce = crypto::random_nonce();
    std::string challenge;
    wire::put_u32(challenge, kAuthMagic);
    wire::put_u32(challenge, kAuthVersion);
    challenge.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
    c.transcript += challenge;
    crypto::Mac proof = handshake_proof(token, kServerProofLabel, c.transcript);
    c.out.append(challenge);
    c.out.append(reinterpret_cast<const char*>(proof.data()), proof.size());
    c.auth = Auth::proof;
  }
  if (c.auth == Auth::proof) {
    if (c.in.size() < kAuthProofBytes) return true;
    if (!check_handshake_proof(token, kClientProofLabel, c.transcript,
                               reinterpret_cast<const unsigned char*>(c.in.data())))
      return reject("failed the job token check (a process of another job, or a different COMM_JOB_TOKEN)");
    c.in.erase(0, kAuthProofBytes);
    c.transcript.clear();
    c.auth = Auth::done;
  }
  return true;
}

void TcpStoreServer::Impl::drop_unauthenticated() {
  auto now = Clock::now();
  for (auto it = clients.begin(); it != clients.end();) {
    auto next = std::next(it);
    if (it->second.auth != Auth::done && now - it->second.since > kAuthTimeout) {
      ++rejected;
      log::warn("store server: closing connection from {}: no handshake within {} s", it->second.peer,
                kAuthTimeout.count());
      drop_client(it->first);
    }
    it = next;
  }
}

bool TcpStoreServer::Impl::parse_requests(uint64_t id, Client& c) {
  if (c.auth != Auth::done) {
    if (!authenticate(c)) return false;
    if (c.auth != Auth::done) return true;
  }
  size_t pos = 0;
  while (!c.parked) {
    const Scan msg = scan_store_message(std::string_view(c.in).substr(pos));
    if (msg.kind == Scan::need_more) break;
    if (msg.kind == Scan::reject) {
      ++rejected;
      log::warn("store server: closing connection from {}: {} (not a dpt store client?)", c.peer, msg.reason);
      return false;
    }
    StoreRequest req;
    try {
      req = decode_store_request(msg.body);  // validates fully before any state is touched
    } catch (const wire::WireError& e) {
      ++rejected;
      log::warn("store server: closing connection from {}: malformed request: {}", c.peer, e.what());
      return false;
    }
    pos += msg.size;
    handle(id, c, std::move(req));
  }
  c.in.erase(0, pos);
  return true;
}

void TcpStoreServer::Impl::handle(uint64_t id, Client& c, StoreRequest req) {
  std::string reply;
  const std::string& key = req.key;
  switch (req.cmd) {
    case kSet: {
      auto [it, inserted] = data.insert_or_assign(key, std::move(req.value));
      if (inserted) ++key_count;
      wire::put_u8(reply, kOk);
      send_reply(c, reply);
      key_set(key);
      return;
    }
    case kAdd: {
      auto it = data.find(key);
      int64_t value = 0;
      if (it != data.end()) {
        try {
          size_t n = 0;
          value = std::stoll(it->second, &n);
          if (n != it->second.size()) throw std::invalid_argument("trailing");
        } catch (const std::exception&) {
          wire::put_u8(reply, kError);
          wire::put_str(reply, "add: the value of key '" + key + "' is not an integer");
          send_reply(c, reply);
          return;
        }
      }
      value += req.delta;
      bool inserted = it == data.end();
      data[key] = std::to_string(value);
      if (inserted) ++key_count;
      wire::put_u8(reply, kOk);
      wire::put_i64(reply, value);
      send_reply(c, reply);
      key_set(key);
      return;
    }
    case kGet:
      park(id, c, kGet, {std::move(req.key)}, req.timeout_ms);
      return;
    case kWait:
      park(id, c, kWait, std::move(req.keys), req.timeout_ms);
      return;
    case kCheck: {
      bool all = std::all_of(req.keys.begin(), req.keys.end(), [&](const std::string& k) { return data.count(k) > 0; });
      wire::put_u8(reply, kOk);
      wire::put_u8(reply, all ? 1 : 0);
      send_reply(c, reply);
      return;
    }
  }
}

void TcpStoreServer::Impl::park(uint64_t id, Client& c, Cmd cmd, std::vector<std::string> keys,
                                uint32_t timeout_ms) {
  uint64_t wid = next_waiter++;
  Waiter& w = waiters[wid];
  w.client = id;
  w.cmd = cmd;
  w.keys = std::move(keys);
  w.deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  c.parked = true;
  advance(wid);
}

bool TcpStoreServer::Impl::advance(uint64_t wid) {
  Waiter& w = waiters.at(wid);
  while (w.first_missing < w.keys.size() && data.count(w.keys[w.first_missing])) ++w.first_missing;
  if (w.first_missing == w.keys.size()) {
    answer(wid, false);
    return true;
  }
  watchers[w.keys[w.first_missing]].push_back(wid);
  return false;
}

void TcpStoreServer::Impl::answer(uint64_t wid, bool timed_out) {
  auto wit = waiters.find(wid);
  Waiter w = std::move(wit->second);
  waiters.erase(wit);
  auto cit = clients.find(w.client);
  if (cit == clients.end()) return;
  Client& c = cit->second;
  std::string reply;
  if (timed_out) {
    std::vector<const std::string*> missing;
    for (size_t i = w.first_missing; i < w.keys.size(); ++i)
      if (!data.count(w.keys[i])) missing.push_back(&w.keys[i]);
    wire::put_u8(reply, kTimeout);
    // The reply must fit a message: list as many missing keys as fit, then stop.
    uint32_t n = 0;
    std::string list;
    for (const std::string* k : missing) {
      if (list.size() + k->size() + 4 > kMaxValueBytes) break;
      wire::put_str(list, *k);
      ++n;
    }
    wire::put_u32(reply, n);
    reply += list;
  } else {
    wire::put_u8(reply, kOk);
    if (w.cmd == kGet) wire::put_str(reply, data.at(w.keys[0]));
  }
  send_reply(c, reply);
  c.parked = false;
  // Requests that arrived while this one was parked are parsed by pump(), never from
  // here: we may be inside parse_requests() of this very client.
  unparked = true;
}

void TcpStoreServer::Impl::key_set(const std::string& key) {
  auto it = watchers.find(key);
  if (it == watchers.end()) return;
  std::vector<uint64_t> ws = std::move(it->second);
  watchers.erase(it);
  for (uint64_t wid : ws) {
    auto wit = waiters.find(wid);
    // Stale entry: the waiter was answered or its client left.
    if (wit == waiters.end() || wit->second.first_missing >= wit->second.keys.size() ||
        wit->second.keys[wit->second.first_missing] != key)
      continue;
    advance(wid);
  }
}

void TcpStoreServer::Impl::expire_waiters() {
  auto now = Clock::now();
  std::vector<uint64_t> expired;
  for (const auto& [wid, w] : waiters)
    if (w.deadline <= now) expired.push_back(wid);
  for (uint64_t wid : expired)
    if (waiters.count(wid)) answer(wid, true);
}

void TcpStoreServer::Impl::pump() {
  while (unparked) {
    unparked = false;
    for (auto it = clients.begin(); it != clients.end();) {
      auto next = std::next(it);
      Client& c = it->second;
      if (!c.parked && c.in.size() >= kHeaderBytes && !parse_requests(it->first, c)) drop_client(it->first);
      it = next;
    }
  }
}

void TcpStoreServer::Impl::drop_client(uint64_t id) {
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (it->second.client == id)
      it = waiters.erase(it);
    else
      ++it;
  }
  clients.erase(id);
}

}  // namespace dpt
