// TcpStoreClient: one connection, one request at a time (a mutex serializes callers).
// get/wait carry their timeout to the server, which answers "timeout" with the keys
// still missing; the client waits a little longer than that for the reply so the
// server's answer, with its list of missing keys, is what the user sees.
#include <algorithm>
#include <thread>

#include "comm/net/secure_session.h"
#include "comm/store/munge_secret.h"
#include "comm/store/tcp_store.h"
#include "comm/store/tcp_store_protocol.h"
#include "comm/store/tcp_store_request.h"
#include "comm/wire.h"

namespace dpt {

using namespace store_proto;
using net::Clock;

namespace {
constexpr Millis kReplySlack{5000};

// A reply whose record failed its check.
struct StoreTampered : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string join_keys(const std::vector<std::string>& keys) {
  std::string s = "[";
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + keys[i];
  return s + "]";
}

uint32_t to_wire_ms(Millis t) {
  return static_cast<uint32_t>(std::clamp<int64_t>(t.count(), 0, int64_t{UINT32_MAX}));
}

void check_key(const std::string& key) {
  if (key.size() > kMaxKeyBytes)
    throw std::invalid_argument("store key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
                                std::to_string(kMaxKeyBytes));
}
}  // namespace

std::string fetch_job_token_by_munge(const std::string& host, int port, Millis timeout, const ErrorContext& ctx) {
  const std::string what = "store server " + host + ":" + std::to_string(port);
  const auto deadline = Clock::now() + timeout;
  std::string cred;
  try {
    for (;;) {
      net::Socket s = net::connect_with_retry(host, port, deadline);
      AuthHello mine;
      mine.nonce = crypto::random_nonce();
      mine.munge_bootstrap = true;
      const std::string hello = encode_auth_hello(mine);
      net::send_all(s.fd(), hello.data(), hello.size(), deadline, what);
      char len_bytes[4];
      try {
        net::recv_all(s.fd(), len_bytes, sizeof len_bytes, deadline, what);
      } catch (const net::SocketClosed&) {
        // Refused: the store was up before its owner said it hands out credentials (or it
        // could not mint one). Asked again until the deadline, as a refused connect is.
        if (Clock::now() + Millis(200) >= deadline) throw;
        std::this_thread::sleep_for(Millis(200));
        continue;
      }
      const uint32_t len = wire::load_u32(len_bytes);
      if (len == 0 || len > kMaxCredentialBytes)
        throw net::SocketError(what + " answered with a credential of " + std::to_string(len) + " bytes");
      cred.resize(len);
      net::recv_all(s.fd(), cred.data(), cred.size(), deadline, what);
      break;
    }
  } catch (const net::SocketTimeout& e) {
    throw TimeoutError(ctx, std::string("asking rank 0's store for the job token (munge): ") + e.what());
  } catch (const net::SocketError& e) {
    throw PeerError(ctx, std::string("asking rank 0's store for the job token (munge): ") + e.what() +
                             " (is rank 0 running, as a Slurm job without COMM_JOB_TOKEN?)");
  }
  std::string token;
  try {
    token = munge_open(cred);
  } catch (const std::exception& e) {
    throw PeerError(ctx, std::string("the job token from ") + what + " did not decode: " + e.what() +
                             " (rank 0 of another user or cluster, or munged not running on this host?)");
  }
  if (token.size() < kMinJobTokenBytes)
    throw PeerError(ctx, "the job token from " + what + " is " + std::to_string(token.size()) + " bytes long");
  return token;
}

TcpStoreClient::TcpStoreClient(std::string host, int port, Millis timeout, ErrorContext ctx, std::string token)
    : host_(std::move(host)), port_(port), token_(std::move(token)), timeout_(timeout), ctx_(std::move(ctx)) {}

TcpStoreClient::~TcpStoreClient() = default;

void TcpStoreClient::set_context(ErrorContext c) {
  std::lock_guard<std::mutex> lk(mu_);
  ctx_ = std::move(c);
}

std::string TcpStoreClient::address() const {
  return (host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

ErrorContext TcpStoreClient::ctx(const std::string& op) const {
  ErrorContext c = ctx_;
  if (c.backend.empty()) c.backend = "store";
  c.op = op;
  return c;
}

void TcpStoreClient::ensure_connected() {
  if (sock_.valid()) return;
  // The first connect waits out a server that is still starting; a reconnect after a
  // dropped connection does not: rank 0's server is gone for good when it refuses, and
  // waiting the whole rendezvous timeout would only hide that.
  const auto deadline = Clock::now() + (ever_connected_ ? std::min(timeout_, Millis(1000)) : timeout_);
  sock_ = net::connect_with_retry(host_, port_, deadline);
  try {
    authenticate(deadline);
    ever_connected_ = true;
  } catch (...) {
    sock_.close();
    throw;
  }
}

void TcpStoreClient::authenticate(Clock::time_point deadline) {
  const std::string what = "store server " + address();
  AuthHello mine;
  mine.nonce = crypto::random_nonce();
  mine.encrypt = net::wants_encryption(sock_.fd());
  mine.cipher = static_cast<uint8_t>(crypto::preferred_cipher());
  const std::string hello = encode_auth_hello(mine);
  net::send_all(sock_.fd(), hello.data(), hello.size(), deadline, what);
  char theirs[kAuthHelloBytes];
  net::recv_all(sock_.fd(), theirs, sizeof theirs, deadline, what);
  if (scan_auth_hello(std::string_view(theirs, sizeof theirs)).kind != Scan::complete)
    throw net::SocketError("malformed handshake from " + what + " (is that port really a dpt store of this version?)");
  const AuthHello server = decode_auth_hello(std::string_view(theirs, sizeof theirs));
  const std::string transcript = hello + std::string(theirs, sizeof theirs);
  // We prove first (tcp_store_protocol.h), then check the server's proof.
  crypto::Mac proof = handshake_proof(token_, kClientProofLabel, transcript);
  net::send_all(sock_.fd(), proof.data(), proof.size(), deadline, what);
  unsigned char server_proof[kAuthProofBytes];
  try {
    net::recv_all(sock_.fd(), server_proof, sizeof server_proof, deadline, what);
  } catch (const net::SocketClosed& e) {
    throw net::SocketError(what + " rejected our proof of the job token: it belongs to another job, or was given a "
                           "different COMM_JOB_TOKEN (" + e.what() + ")");
  }
  if (!check_handshake_proof(token_, kServerProofLabel, transcript, server_proof))
    throw net::SocketError(what + " failed the job token check: it belongs to another job, or was given a "
                           "different COMM_JOB_TOKEN");
  auto session = net::make_session({token_, transcript, kClientKeyLabel, kServerKeyLabel, /*dialing=*/true,
                                    mine.encrypt || server.encrypt,
                                    crypto::agree_cipher(crypto::Cipher(mine.cipher), crypto::Cipher(server.cipher))},
                                   sock_.fd());
  rec_ = std::make_unique<net::RecordChannel>(*session);
}

std::string TcpStoreClient::call_once(const std::string& body, Clock::time_point deadline) {
  const std::string msg = store_message(body);
  std::string what = "store server " + address();
  rec_->writer.seal(msg.data(), msg.size());
  rec_->writer.write_all(sock_.fd(), deadline, what);
  char header[kHeaderBytes];
  read_reply(header, sizeof header, deadline, what);
  const Scan scan = scan_store_message(std::string_view(header, sizeof header));
  if (scan.kind == Scan::reject)
    throw net::SocketError("malformed reply from " + what + " (is that port really a dpt store?)");
  std::string reply(scan.size - kHeaderBytes, '\0');
  read_reply(reply.data(), reply.size(), deadline, what);
  return reply;
}

void TcpStoreClient::read_reply(void* dst, size_t n, Clock::time_point deadline, const std::string& what) {
  try {
    rec_->reader.read_all(sock_.fd(), dst, n, deadline, what);
  } catch (const crypto::AuthFailure& e) {
    // Never used: the connection is dropped and the call fails, naming the connection.
    throw StoreTampered(what + " (" + rec_->connection + "): a reply failed its authentication check: " + e.what());
  }
}

std::string TcpStoreClient::call(const std::string& op, const std::string& body, Millis server_wait, bool retry) {
  if (body.size() > kMaxBodyBytes)
    throw UsageError(ctx(op), "request of " + std::to_string(body.size()) + " bytes exceeds the store's limit");
  std::lock_guard<std::mutex> lk(mu_);
  for (int attempt = 0;; ++attempt) {
    try {
      ensure_connected();
      requests_.fetch_add(1, std::memory_order_relaxed);
      return call_once(body, Clock::now() + server_wait + timeout_ + kReplySlack);
    } catch (const StoreTampered& e) {
      sock_.close();
      throw PeerError(ctx(op), e.what());  // not retried: someone on the path changes bytes
    } catch (const net::SocketClosed& e) {
      sock_.close();
      if (retry && attempt == 0) continue;
      throw PeerError(ctx(op), std::string(e.what()) + " (did rank 0, which serves the store, exit?)");
    } catch (const net::SocketTimeout& e) {
      // The connection is now out of step (a reply may still arrive): start afresh.
      const bool was_reconnecting = !sock_.valid() && ever_connected_;
      sock_.close();
      // A reconnect that timed out after a working connection: the server is gone.
      if (was_reconnecting)
        throw PeerError(ctx(op), std::string(e.what()) + " (did rank 0, which serves the store, exit?)");
      throw TimeoutError(ctx(op), e.what());
    } catch (const net::SocketError& e) {
      sock_.close();
      // Refused after we had been connected: the server is most likely gone.
      throw PeerError(ctx(op), std::string(e.what()) + (attempt > 0 || ever_connected_ ? " (did rank 0, which serves the store, exit?)" : ""));
    }
  }
}

static void check_status(wire::Reader& r, const ErrorContext& c) {
  uint8_t status = r.u8();
  if (status == kError) throw UsageError(c, r.str(kMaxValueBytes));
  if (status != kOk) throw MismatchError(c, "unexpected store reply status " + std::to_string(status));
}

void TcpStoreClient::set(const std::string& key, const std::string& value) {
  check_key(key);
  if (value.size() > kMaxValueBytes)
    throw UsageError(ctx("store set"), "value of " + std::to_string(value.size()) + " bytes for key '" + key +
                                           "' exceeds the limit of " + std::to_string(kMaxValueBytes));
  const std::string body = encode_store_request(StoreRequest::set(key, value));
  std::string reply = call("store set", body, Millis(0), true);
  wire::Reader r(reply);
  check_status(r, ctx("store set"));
}

std::string TcpStoreClient::get(const std::string& key, Millis timeout) {
  check_key(key);
  const std::string body = encode_store_request(StoreRequest::get(key, to_wire_ms(timeout)));
  std::string reply = call("store get", body, timeout, true);
  wire::Reader r(reply);
  uint8_t status = r.u8();
  if (status == kTimeout)
    throw TimeoutError(ctx("store get"), "key '" + key + "' did not appear within " +
                                             std::to_string(timeout.count()) + " ms");
  if (status != kOk) throw MismatchError(ctx("store get"), "unexpected store reply status " + std::to_string(status));
  return r.str(kMaxValueBytes);
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  check_key(key);
  const std::string body = encode_store_request(StoreRequest::add(key, delta));
  // Not retried: a lost reply does not tell whether the add happened.
  std::string reply = call("store add", body, Millis(0), false);
  wire::Reader r(reply);
  check_status(r, ctx("store add"));
  return r.i64();
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, Millis timeout) {
  if (keys.empty()) return;
  if (keys.size() > kMaxKeys) throw UsageError(ctx("store wait"), "too many keys in one wait");
  for (const auto& k : keys) check_key(k);
  const std::string body = encode_store_request(StoreRequest::wait(keys, to_wire_ms(timeout)));
  std::string reply = call("store wait", body, timeout, true);
  wire::Reader r(reply);
  uint8_t status = r.u8();
  if (status == kTimeout) {
    uint32_t n = r.u32();
    std::vector<std::string> missing;
    for (uint32_t i = 0; i < n && i < kMaxKeys; ++i) missing.push_back(r.str(kMaxKeyBytes));
    throw TimeoutError(ctx("store wait"), std::to_string(missing.size()) + " of " + std::to_string(keys.size()) +
                                              " keys missing after " + std::to_string(timeout.count()) +
                                              " ms: " + join_keys(missing));
  }
  if (status != kOk) throw MismatchError(ctx("store wait"), "unexpected store reply status " + std::to_string(status));
}

bool TcpStoreClient::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys) check_key(k);
  const std::string body = encode_store_request(StoreRequest::check(keys));
  std::string reply = call("store check", body, Millis(0), true);
  wire::Reader r(reply);
  check_status(r, ctx("store check"));
  return r.u8() != 0;
}

bool TcpStoreClient::check(const std::string& key) { return check(std::vector<std::string>{key}); }

}  // namespace dpt
