#pragma once
// Small RAII socket utilities shared by the TCP store and the TCP backend.
//
// Terms:
//   endpoint  - a resolved address: a sockaddr (IPv4 or IPv6) plus its text "host:port"
//               ("[::1]:29500" for IPv6).
//   listener  - a socket bound to one endpoint and listening; port 0 asks the kernel for
//               an ephemeral port, which listen_on() reports back.
//   deadline  - an absolute steady_clock time; every blocking helper here gives up at it
//               with SocketTimeout instead of waiting forever.
// Every error is an exception whose text names the endpoint and the errno string.
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace dpt::net {

struct SecureSession;  // record_stream.h

using Clock = std::chrono::steady_clock;

// A socket call failed. `err` is the errno (0 when not a system error).
class SocketError : public std::runtime_error {
 public:
  SocketError(const std::string& what, int err = 0) : std::runtime_error(what), err_(err) {}
  int err() const { return err_; }

 private:
  int err_;
};
// The peer closed the connection (EOF, ECONNRESET, EPIPE).
class SocketClosed : public SocketError { using SocketError::SocketError; };
// A deadline passed.
class SocketTimeout : public SocketError { using SocketError::SocketError; };

// Owns one file descriptor; closes it on destruction. Move-only. A connection whose
// handshake derived record keys carries them along (session()), so every hand-over of the
// socket (mesh, connector, engine) hands its keys over with it.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.release()), session_(std::move(o.session_)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = o.release();
      session_ = std::move(o.session_);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void close();
  const std::shared_ptr<const SecureSession>& session() const { return session_; }
  void set_session(std::shared_ptr<const SecureSession> s) { session_ = std::move(s); }

 private:
  int fd_ = -1;
  std::shared_ptr<const SecureSession> session_;
};

enum class Family { any, ipv4, ipv6 };
// "ipv4" | "ipv6" | "auto" (also "inet", "inet6", "4", "6"); throws std::invalid_argument.
Family parse_family(const std::string& s);

struct Endpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family() const { return addr.ss_family; }
  int port() const;
  std::string host() const;  // numeric host, no brackets
  std::string str() const;   // "1.2.3.4:5" or "[::1]:5"
};

// Resolves host (name or numeric, IPv4 or IPv6) to endpoints of `family`, IPv4 first
// when `family` is any. Throws SocketError naming host and the resolver's message.
std::vector<Endpoint> resolve(const std::string& host, int port, Family family = Family::any);

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

struct Listener {
  Socket sock;
  Endpoint bound;  // the address actually bound, with the real port
  int port() const { return bound.port(); }
};

// Binds and listens on host:port (port 0 = ephemeral). SO_REUSEADDR is set so a restart
// on a fixed port does not wait for TIME_WAIT. The socket is close-on-exec.
Listener listen_on(const std::string& host, int port, Family family = Family::any, int backlog = 1024);

// Connects to host:port, retrying refused/unreachable attempts until `deadline` (the
// peer may not be listening yet). Returns a blocking socket with TCP_NODELAY set.
Socket connect_with_retry(const std::string& host, int port, Clock::time_point deadline,
                          Family family = Family::any);

// Accepts one connection, waiting until `deadline`. Returns an invalid Socket on
// timeout. `peer` receives the remote address when non-null.
Socket accept_until(int listen_fd, Clock::time_point deadline, Endpoint* peer = nullptr);

void set_nodelay(int fd);
void set_nonblocking(int fd, bool on);
// Asks for large kernel buffers (the kernel clamps to net.core.*mem_max).
void set_buffer_sizes(int fd, int bytes);
// Enables TCP keepalive with short probes so a silently vanished host is noticed.
void set_keepalive(int fd);
// True when both ends of the connected socket `fd` have the same IP address: the peer
// runs on this machine (or in this network namespace), so its death closes the
// connection through this kernel and keepalive probes would find nothing more.
bool peer_has_our_address(int fd);

// Waits with poll() until `fd` has `events` (POLLIN/POLLOUT) or `deadline`: false then.
bool wait_fd(int fd, short events, Clock::time_point deadline);

// Blocking full transfers on a (blocking or non-blocking) socket, waiting with poll()
// until `deadline`; EINTR-safe. `what` names the peer in error messages.
void send_all(int fd, const void* data, size_t n, Clock::time_point deadline, const std::string& what);
void recv_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& what);

// The address this process should listen on for peers: COMM_TCP_ADDR if set, else the
// address of interface COMM_TCP_IFNAME, else the local address used to reach
// master_addr (loopback when master_addr is loopback). COMM_TCP_FAMILY filters.
std::string choose_listen_host(const std::string& master_addr);
// Address of a named interface (getifaddrs); throws listing the interfaces that exist.
std::string interface_address(const std::string& ifname, Family family);
// The local address the kernel would use to reach `host` (UDP connect; nothing is sent).
std::string local_address_towards(const std::string& host, Family family);

// errno as text: "Connection refused (errno 111)".
std::string errno_string(int err);

}  // namespace dpt::net
