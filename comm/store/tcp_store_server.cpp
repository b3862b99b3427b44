// TcpStoreServer: one thread, poll() over the listener, a wake-up pipe and every client.
//
// Terms:
//   client  - one accepted connection with its input and output buffers.
//   waiter  - a parked get/wait request: its keys, the index of the first key still
//             missing, and a deadline. A waiter is filed under its first missing key
//             ("watchers"), so setting a key only looks at the waiters that need it.
//   auth    - a client's handshake stage (tcp_store_protocol.h): hello expected, proof
//             expected, or done. Until done, only handshake bytes are read and
//             kAuthTimeout bounds the whole exchange, so a scanner or a stray client
//             costs one slot for a few seconds, learns nothing computed from the token
//             and changes no key. Once done, the client's bytes arrive in records
//             (Client::rec) and every reply leaves in them.
//   bounds  - what one authenticated client can make the server hold is capped: the
//             keys and bytes stored (COMM_STORE_MAX_KEYS, COMM_STORE_MAX_BYTES: a set
//             beyond them is refused with an error naming the limit), the bytes of
//             parked requests (kMaxParkedBytes), its unread replies (kMaxOutBytes,
//             checked after every request it pipelines: the client is cut off), and a
//             finished wait leaves nothing behind (its watcher entry goes with it).
//   write-once - a job's identity and addresses ("<prefix>/job", "<prefix>/addr/<r>",
//             "<prefix>/addrs") may be set again only to the same value (a retried set),
//             so no client can redirect a rank's peers once published.
// A client with a parked request is not read from until the request is answered: one
// request at a time per connection keeps replies in order.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "comm/net/secure_session.h"
#include "comm/store/job_token.h"
#include "comm/store/munge_secret.h"
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
constexpr size_t kMaxCredentials = 65536;       // munge credentials one server mints
constexpr size_t kMaxParkedBytes = 256u << 20;  // keys of all parked get/wait requests together

size_t limit_from_env(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (*end || n == 0) throw std::invalid_argument(std::string(name) + "='" + v + "': use a positive integer");
  return static_cast<size_t>(n);
}

// tcp_store_server.cpp's "write-once": the keys that say who a job and its ranks are.
bool write_once_key(const std::string& key) {
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos) return false;
  const std::string_view last(key.data() + slash + 1, key.size() - slash - 1);
  if (last == "job" || last == "addrs") return true;
  const size_t prev = key.rfind('/', slash - 1);
  const std::string_view parent =
      std::string_view(key).substr(prev == std::string::npos ? 0 : prev + 1, slash - (prev == std::string::npos ? 0 : prev + 1));
  return parent == "addr" && !last.empty() && last.find_first_not_of("0123456789") == std::string_view::npos;
}

enum class Auth { hello, proof, done };

struct Client {
  net::Socket sock;
  std::string peer;
  std::string in;
  std::string out;
  size_t out_pos = 0;
  bool parked = false;  // has a waiter; do not parse more requests
  Auth auth = Auth::hello;
  std::string transcript;   // client hello || server hello
  bool encrypt = true;      // agreed from both hellos
  crypto::Cipher cipher = crypto::Cipher::aes256_gcm;
  std::unique_ptr<net::RecordChannel> rec;  // once authenticated
  Clock::time_point since;  // accepted at
  bool close_when_sent = false;  // a bootstrap's credential: the connection ends with it
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
  std::atomic<int64_t> watched{0};
  std::string token;
  std::atomic<bool> munge_bootstrap{false};
  size_t credentials_given = 0;
  size_t max_keys = limit_from_env("COMM_STORE_MAX_KEYS", size_t{1} << 20);
  size_t max_bytes = limit_from_env("COMM_STORE_MAX_BYTES", size_t{1} << 30);
  size_t data_bytes = 0;    // keys and values stored
  size_t parked_bytes = 0;  // keys of parked requests

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
  bool hand_out_credential(Client& c);  // a bootstrap hello (munge_secret.h)
  void drop_unauthenticated();
  void handle(uint64_t id, Client& c, StoreRequest req);  // req is validated already
  void send_reply(Client& c, const std::string& body) {
    const std::string msg = store_message(body);
    c.rec->writer.seal(msg.data(), msg.size());
    c.rec->writer.take(c.out);
  }
  // Stores key = value unless a bound or write-once forbids it; else the error text.
  std::string store_value(const std::string& key, std::string value);
  void unwatch(uint64_t wid, const Waiter& w);
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
void TcpStoreServer::hand_out_token_by_munge() { impl_->munge_bootstrap = true; }
int64_t TcpStoreServer::watched_keys() const { return impl_->watched.load(); }

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
        if (ok && it->second.close_when_sent && it->second.out_pos == it->second.out.size()) ok = false;
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
    watched = static_cast<int64_t>(watchers.size());
    // Replies produced for other clients (a set waking waiters) are flushed eagerly.
    for (auto it = clients.begin(); it != clients.end();) {
      auto next = std::next(it);
      if (it->second.out_pos < it->second.out.size() && !write_client(it->second)) {
        drop_client(it->first);
      } else if (it->second.close_when_sent && it->second.out_pos == it->second.out.size()) {
        drop_client(it->first);  // its credential is out
      }
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
    ssize_t r;
    if (c.rec) {
      try {
        r = c.rec->reader.read(c.sock.fd(), buf, sizeof buf);
      } catch (const crypto::AuthFailure& e) {
        ++rejected;
        log::warn("store server: closing connection from {} ({}): a request failed its authentication check "
                  "(tampered with, replayed or injected on the way): {}",
                  c.peer, c.rec->connection, e.what());
        return false;
      }
    } else {
      r = ::recv(c.sock.fd(), buf, sizeof buf, 0);  // the handshake's bytes
    }
    if (r > 0) {
      c.in.append(buf, static_cast<size_t>(r));
      if (!parse_requests(id, c)) return false;
      if (c.parked) return true;
      // Records may hold more than one read returns: read until the socket is empty.
      if (!c.rec && static_cast<size_t>(r) < sizeof buf) return true;
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
    const AuthHello theirs = decode_auth_hello(c.in);
    if (theirs.munge_bootstrap) return hand_out_credential(c);
    c.transcript = c.in.substr(0, kAuthHelloBytes);
    c.in.erase(0, kAuthHelloBytes);
    AuthHello mine;
    mine.nonce = crypto::random_nonce();
    mine.encrypt = net::wants_encryption(c.sock.fd());
    mine.cipher = static_cast<uint8_t>(crypto::preferred_cipher());
    const std::string reply = encode_auth_hello(mine);
    c.transcript += reply;
    c.out.append(reply);  // a nonce only: nothing computed from the token before the client proves
    c.encrypt = mine.encrypt || theirs.encrypt;
    c.cipher = crypto::agree_cipher(crypto::Cipher(mine.cipher), crypto::Cipher(theirs.cipher));
    c.auth = Auth::proof;
  }
  if (c.auth == Auth::proof) {
    if (c.in.size() < kAuthProofBytes) return true;
    if (!check_handshake_proof(token, kClientProofLabel, c.transcript,
                               reinterpret_cast<const unsigned char*>(c.in.data())))
      return reject("failed the job token check (a process of another job, or a different COMM_JOB_TOKEN)");
    c.in.erase(0, kAuthProofBytes);
    if (!c.in.empty()) return reject("sent bytes before the server's proof");
    crypto::Mac proof = handshake_proof(token, kServerProofLabel, c.transcript);
    c.out.append(reinterpret_cast<const char*>(proof.data()), proof.size());
    c.rec = std::make_unique<net::RecordChannel>(*net::make_session(
        {token, c.transcript, kClientKeyLabel, kServerKeyLabel, /*dialing=*/false, c.encrypt, c.cipher}, c.sock.fd()));
    c.transcript.clear();
    c.auth = Auth::done;
  }
  return true;
}

bool TcpStoreServer::Impl::hand_out_credential(Client& c) {
  auto reject = [&](const std::string& why) {
    ++rejected;
    log::warn("store server: closing connection from {}: {}", c.peer, why);
    return false;
  };
  if (!munge_bootstrap.load()) return reject("asks for the token by munge, but this store hands none out");
  // Each credential costs a munge call (milliseconds): a job needs one per rank.
  if (credentials_given >= kMaxCredentials) return reject("asks for a munge credential beyond this store's limit");
  std::string cred;
  try {
    cred = munge_seal(token);
  } catch (const std::exception& e) {
    return reject(std::string("could not mint a munge credential: ") + e.what());
  }
  ++credentials_given;
  c.in.clear();
  wire::put_u32(c.out, static_cast<uint32_t>(cred.size()));
  c.out += cred;
  c.parked = true;  // read nothing more from it
  c.close_when_sent = true;
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
    // Pipelined requests (gets of a 16 MiB value, say) must not pile up replies the
    // client does not read: checked after each one, not once the batch is parsed.
    if (c.out.size() - c.out_pos > kMaxOutBytes) {
      ++rejected;
      log::warn("store server: closing connection from {}: {} MiB of replies it does not read (limit {} MiB)", c.peer,
                (c.out.size() - c.out_pos) >> 20, kMaxOutBytes >> 20);
      return false;
    }
  }
  c.in.erase(0, pos);
  return true;
}

void TcpStoreServer::Impl::handle(uint64_t id, Client& c, StoreRequest req) {
  std::string reply;
  const std::string& key = req.key;
  switch (req.cmd) {
    case kSet: {
      if (std::string why = store_value(key, std::move(req.value)); !why.empty()) {
        wire::put_u8(reply, kError);
        wire::put_str(reply, why);
        send_reply(c, reply);
        return;
      }
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
      if (std::string why = store_value(key, std::to_string(value)); !why.empty()) {
        wire::put_u8(reply, kError);
        wire::put_str(reply, why);
        send_reply(c, reply);
        return;
      }
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

std::string TcpStoreServer::Impl::store_value(const std::string& key, std::string value) {
  auto it = data.find(key);
  if (it != data.end()) {
    if (it->second == value) return "";
    if (write_once_key(key))
      return "key '" + key + "' says who the job or a rank is and is written once: it holds another value already";
    const size_t after = data_bytes - it->second.size() + value.size();
    if (after > max_bytes)
      return "the store is full: " + std::to_string(after) + " bytes of keys and values would exceed " +
             "COMM_STORE_MAX_BYTES=" + std::to_string(max_bytes);
    data_bytes = after;
    it->second = std::move(value);
    return "";
  }
  if (data.size() + 1 > max_keys)
    return "the store is full: " + std::to_string(data.size()) + " keys (COMM_STORE_MAX_KEYS=" +
           std::to_string(max_keys) + ")";
  const size_t after = data_bytes + key.size() + value.size();
  if (after > max_bytes)
    return "the store is full: " + std::to_string(after) + " bytes of keys and values would exceed " +
           "COMM_STORE_MAX_BYTES=" + std::to_string(max_bytes);
  data_bytes = after;
  data.emplace(key, std::move(value));
  ++key_count;
  return "";
}

void TcpStoreServer::Impl::park(uint64_t id, Client& c, Cmd cmd, std::vector<std::string> keys,
                                uint32_t timeout_ms) {
  size_t bytes = 0;
  for (const auto& k : keys) bytes += k.size() + 64;  // and the bookkeeping of each
  if (parked_bytes + bytes > kMaxParkedBytes) {
    std::string reply;
    wire::put_u8(reply, kError);
    wire::put_str(reply, "the store holds " + std::to_string(parked_bytes >> 20) +
                             " MiB of waiting requests already; retry later");
    send_reply(c, reply);
    return;
  }
  parked_bytes += bytes;
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

void TcpStoreServer::Impl::unwatch(uint64_t wid, const Waiter& w) {
  size_t bytes = 0;
  for (const auto& k : w.keys) bytes += k.size() + 64;
  parked_bytes -= std::min(parked_bytes, bytes);
  if (w.first_missing >= w.keys.size()) return;
  auto it = watchers.find(w.keys[w.first_missing]);
  if (it == watchers.end()) return;
  std::erase(it->second, wid);
  if (it->second.empty()) watchers.erase(it);  // a wait on a key never set leaves nothing
}

void TcpStoreServer::Impl::answer(uint64_t wid, bool timed_out) {
  auto wit = waiters.find(wid);
  Waiter w = std::move(wit->second);
  waiters.erase(wit);
  unwatch(wid, w);
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
      if (!c.parked && c.rec && c.rec->reader.ready()) {
        // Records read from the socket before the client parked raise no POLLIN.
        if (!read_client(it->first, c)) drop_client(it->first);
      } else if (!c.parked && c.in.size() >= kHeaderBytes && !parse_requests(it->first, c)) {
        drop_client(it->first);
      }
      it = next;
    }
  }
}

void TcpStoreServer::Impl::drop_client(uint64_t id) {
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (it->second.client == id) {
      unwatch(it->first, it->second);
      it = waiters.erase(it);
    } else {
      ++it;
    }
  }
  clients.erase(id);
}

}  // namespace dpt
