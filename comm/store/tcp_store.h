#pragma once
// The TCP key-value store used for rendezvous: rank 0 runs a TcpStoreServer at
// MASTER_ADDR:MASTER_PORT, every rank talks to it through a TcpStoreClient.
// The wire protocol is in comm/tcp_store_protocol.h. Every connection first proves it
// knows the job token (comm/store/job_token.h); both ends must be given the same token.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "comm/error.h"
#include "comm/store/job_token.h"
#include "comm/net/record_stream.h"
#include "comm/net/socket.h"
#include "comm/store/store.h"

namespace dpt {

// Serves many clients from one thread with poll(). Blocking requests (get, wait) are
// parked server-side and answered when their keys appear or their deadline passes, so
// one slow client never blocks another. Stops and joins on destruction.
class TcpStoreServer {
 public:
  // Binds host:port only (port 0 = ephemeral; see port()). Throws net::SocketError.
  // Clients must prove knowledge of `token` before any request is read.
  TcpStoreServer(const std::string& host, int port, std::string token = job_token_from_env());
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const;
  std::string host() const;  // numeric address actually bound
  // Connections closed because they sent a malformed or oversized message (for tests
  // and logs: a port scanner or a stray HTTP client shows up here).
  int64_t rejected_connections() const;
  int64_t num_keys() const;
  // Keys some parked get/wait is filed under (for tests: a finished wait leaves none).
  int64_t watched_keys() const;
  // From now on a client may ask for the token as a munge credential (the bootstrap of
  // tcp_store_protocol.h): rank 0 of a Slurm job that nobody handed a secret.
  void hand_out_token_by_munge();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The token of a store whose server hands it out by munge (TcpStoreServer::
// hand_out_token_by_munge), asked for until `timeout` (the server may not listen yet).
// Throws PeerError / TimeoutError naming the store and munge's message.
std::string fetch_job_token_by_munge(const std::string& host, int port, Millis timeout, const ErrorContext& ctx);

// A Store backed by a TcpStoreServer. Thread-safe (calls are serialized on one
// connection). Connects lazily with retry, so a client may start before the server.
class TcpStoreClient : public Store {
 public:
  // `timeout` bounds connecting and every non-waiting call; `ctx` prefixes errors.
  TcpStoreClient(std::string host, int port, Millis timeout, ErrorContext ctx = {},
                 std::string token = job_token_from_env());
  ~TcpStoreClient() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::string& key) override;
  bool check(const std::vector<std::string>& keys);

  void set_context(ErrorContext ctx);
  std::string address() const;  // "host:port"
  // Requests this client has sent so far, resends included (for start-up figures:
  // bench/tcp_connections.sh counts a rank's requests while its communicator is built).
  int64_t requests_sent() const { return requests_.load(std::memory_order_relaxed); }

 private:
  // Sends one request body and returns the reply body. Reconnects when not connected;
  // `retry` resends once after a dropped connection (only for idempotent requests).
  std::string call(const std::string& op, const std::string& body, Millis server_wait, bool retry);
  std::string call_once(const std::string& body, net::Clock::time_point deadline);
  void ensure_connected();
  // The auth handshake on a fresh connection; throws PeerError when the server's proof
  // is wrong (another job's store, or a different COMM_JOB_TOKEN).
  void authenticate(net::Clock::time_point deadline);
  void read_reply(void* dst, size_t n, net::Clock::time_point deadline, const std::string& what);
  ErrorContext ctx(const std::string& op) const;

  std::string host_;
  int port_;
  std::string token_;
  Millis timeout_;
  ErrorContext ctx_;
  mutable std::mutex mu_;
  net::Socket sock_;
  std::unique_ptr<net::RecordChannel> rec_;  // the connection's records, once authenticated
  bool ever_connected_ = false;  // guarded by mu_
  std::atomic<int64_t> requests_{0};
};

}  // namespace dpt
