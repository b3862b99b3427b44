#include "comm/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "comm/launch/env.h"

namespace dpt::net {

std::string errno_string(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

void Socket::close() {
  if (fd_ >= 0) {
    ::close(fd_);  // never retried on EINTR: on Linux the fd is gone either way
    fd_ = -1;
  }
  session_.reset();
}

Family parse_family(const std::string& s) {
  if (s.empty() || s == "auto" || s == "any") return Family::any;
  if (s == "ipv4" || s == "inet" || s == "4") return Family::ipv4;
  if (s == "ipv6" || s == "inet6" || s == "6") return Family::ipv6;
  throw std::invalid_argument("COMM_TCP_FAMILY='" + s + "' is not one of ipv4, ipv6, auto");
}

static int to_af(Family f) {
  return f == Family::ipv4 ? AF_INET : f == Family::ipv6 ? AF_INET6 : AF_UNSPEC;
}

int Endpoint::port() const {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return -1;
}

std::string Endpoint::host() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, buf, sizeof buf);
  else if (addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, buf, sizeof buf);
  return buf;
}

std::string Endpoint::str() const {
  if (addr.ss_family == AF_INET6) return "[" + host() + "]:" + std::to_string(port());
  return host() + ":" + std::to_string(port());
}

static std::string join_host_port(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::vector<Endpoint> resolve(const std::string& host, int port, Family family) {
  addrinfo hints{};
  hints.ai_family = to_af(family);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (host.empty() ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    throw SocketError("cannot resolve host '" + host + "': " + ::gai_strerror(rc));
  }
  std::vector<Endpoint> v4, v6;
  for (addrinfo* p = res; p; p = p->ai_next) {
    Endpoint e;
    std::memcpy(&e.addr, p->ai_addr, p->ai_addrlen);
    e.len = p->ai_addrlen;
    (p->ai_family == AF_INET6 ? v6 : v4).push_back(e);
  }
  ::freeaddrinfo(res);
  v4.insert(v4.end(), v6.begin(), v6.end());
  if (v4.empty()) throw SocketError("host '" + host + "' has no address of the requested family");
  return v4;
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  return host.rfind("127.", 0) == 0;
}

Listener listen_on(const std::string& host, int port, Family family, int backlog) {
  std::string last_error;
  for (const Endpoint& e : resolve(host, port, family)) {
    Socket s(::socket(e.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      last_error = "socket(): " + errno_string(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&e.addr), e.len) != 0) {
      last_error = "bind " + e.str() + ": " + errno_string(errno);
      continue;
    }
    if (::listen(s.fd(), backlog) != 0) {
      last_error = "listen " + e.str() + ": " + errno_string(errno);
      continue;
    }
    Listener l;
    l.bound.len = sizeof l.bound.addr;
    ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&l.bound.addr), &l.bound.len);
    l.sock = std::move(s);
    return l;
  }
  throw SocketError("cannot listen on " + join_host_port(host, port) + ": " + last_error);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) throw SocketError("fcntl(F_GETFL): " + errno_string(errno), errno);
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) != 0) throw SocketError("fcntl(F_SETFL): " + errno_string(errno), errno);
}

void set_buffer_sizes(int fd, int bytes) {
  // Best effort: the kernel clamps to its maximum, and autotuning still works when this
  // fails, so errors are ignored.
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

void set_keepalive(int fd) {
  int one = 1, idle = 10, intvl = 2, cnt = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

bool peer_has_our_address(int fd) {
  sockaddr_storage a{}, b{};
  socklen_t la = sizeof a, lb = sizeof b;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &la) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&b), &lb) != 0 || a.ss_family != b.ss_family)
    return false;
  if (a.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr == reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
  if (a.ss_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

static int millis_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000000 ? 1000000 : static_cast<int>(left);
}

// Waits until fd has `events` or the deadline passes; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, millis_until(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw SocketError("poll: " + errno_string(errno), errno);
  }
}

static bool connect_once(const Endpoint& e, Clock::time_point deadline, Socket& out, std::string& err) {
  Socket s(::socket(e.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) {
    err = "socket(): " + errno_string(errno);
    return false;
  }
  int rc = ::connect(s.fd(), reinterpret_cast<const sockaddr*>(&e.addr), e.len);
  if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
    err = errno_string(errno);
    return false;
  }
  if (rc != 0) {
    if (!wait_fd(s.fd(), POLLOUT, deadline)) {
      err = "connect timed out";
      return false;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      err = errno_string(so_error);
      return false;
    }
  }
  set_nonblocking(s.fd(), false);
  set_nodelay(s.fd());
  out = std::move(s);
  return true;
}

Socket connect_with_retry(const std::string& host, int port, Clock::time_point deadline, Family family) {
  std::string err = "no attempt made";
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    std::vector<Endpoint> eps;
    try {
      eps = resolve(host, port, family);
    } catch (const SocketError& e) {
      err = e.what();  // DNS may come up late too: retry until the deadline
    }
    for (const Endpoint& e : eps) {
      Socket s;
      if (connect_once(e, deadline, s, err)) return s;
    }
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  throw SocketTimeout("cannot connect to " + join_host_port(host, port) + ": " + err +
                      " (is the peer running and listening there?)");
}

Socket accept_until(int listen_fd, Clock::time_point deadline, Endpoint* peer) {
  for (;;) {
    if (!wait_fd(listen_fd, POLLIN, deadline)) return Socket();
    Endpoint e;
    e.len = sizeof e.addr;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&e.addr), &e.len, SOCK_CLOEXEC);
    if (fd >= 0) {
      if (peer) *peer = e;
      set_nodelay(fd);
      return Socket(fd);
    }
    // Transient: the connecting side gave up already, or we were interrupted.
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED || errno == EPROTO) continue;
    throw SocketError("accept: " + errno_string(errno), errno);
  }
}

void send_all(int fd, const void* data, size_t n, Clock::time_point deadline, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_fd(fd, POLLOUT, deadline)) throw SocketTimeout("timed out sending to " + what);
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET)
      throw SocketClosed("connection to " + what + " closed: " + errno_string(errno), errno);
    throw SocketError("send to " + what + ": " + errno_string(errno), errno);
  }
}

void recv_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throw SocketClosed("connection closed by " + what);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_fd(fd, POLLIN, deadline)) throw SocketTimeout("timed out receiving from " + what);
      continue;
    }
    if (errno == ECONNRESET) throw SocketClosed("connection reset by " + what, errno);
    throw SocketError("recv from " + what + ": " + errno_string(errno), errno);
  }
}

std::string interface_address(const std::string& ifname, Family family) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw SocketError("getifaddrs: " + errno_string(errno), errno);
  std::string found4, found6, names;
  for (ifaddrs* p = list; p; p = p->ifa_next) {
    if (!p->ifa_addr) continue;
    int af = p->ifa_addr->sa_family;
    if (af != AF_INET && af != AF_INET6) continue;
    std::string name = p->ifa_name;
    if (names.find(" " + name + ",") == std::string::npos) names += " " + name + ",";
    if (name != ifname) continue;
    Endpoint e;
    e.len = af == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&e.addr, p->ifa_addr, e.len);
    if (af == AF_INET && found4.empty()) found4 = e.host();
    // Link-local IPv6 addresses need a scope id to be usable; prefer global ones.
    if (af == AF_INET6 && found6.empty() &&
        !IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(p->ifa_addr)->sin6_addr))
      found6 = e.host();
  }
  ::freeifaddrs(list);
  if (family != Family::ipv6 && !found4.empty()) return found4;
  if (family != Family::ipv4 && !found6.empty()) return found6;
  if (!names.empty()) names.pop_back();
  throw SocketError("COMM_TCP_IFNAME=" + ifname + ": no usable " +
                    (family == Family::ipv4 ? "IPv4 " : family == Family::ipv6 ? "IPv6 " : "") +
                    "address on that interface; interfaces with addresses:" + names);
}

std::string local_address_towards(const std::string& host, Family family) {
  std::string err;
  for (const Endpoint& e : resolve(host, 9, family)) {
    Socket s(::socket(e.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) continue;
    // connect() on a UDP socket only picks a route and a source address.
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&e.addr), e.len) != 0) {
      err = errno_string(errno);
      continue;
    }
    Endpoint local;
    local.len = sizeof local.addr;
    if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&local.addr), &local.len) == 0)
      return local.host();
  }
  throw SocketError("no route from this host to '" + host + "': " + err);
}

std::string choose_listen_host(const std::string& master_addr) {
  Family family = parse_family(env::get_string(env::kTcpFamily));
  std::string addr = env::get_string(env::kTcpAddr);
  if (!addr.empty()) return addr;
  std::string ifname = env::get_string(env::kTcpIfname);
  if (!ifname.empty()) return interface_address(ifname, family);
  std::string master = master_addr.empty() ? std::string("127.0.0.1") : master_addr;
  if (is_loopback_host(master)) {
    if (family == Family::ipv6 || master == "::1") return "::1";
    return "127.0.0.1";
  }
  return local_address_towards(master, family);
}

}  // namespace dpt::net
