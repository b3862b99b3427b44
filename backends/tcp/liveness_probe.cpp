#include "backends/tcp/liveness_probe.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "backends/tcp/frame.h"
#include "comm/wire.h"

namespace dpt::tcp {

Liveness probe_listener(const std::string& host, int port, net::Family family, Millis timeout) {
  std::vector<net::Endpoint> eps;
  try {
    eps = net::resolve(host, port, family);
  } catch (const net::SocketError&) {
    return Liveness::unknown;
  }
  if (eps.empty()) return Liveness::unknown;
  const net::Endpoint& e = eps.front();  // the address the peer published, numeric
  net::Socket s(::socket(e.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return Liveness::unknown;
  int err = 0;
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&e.addr), e.len) != 0) {
    err = errno;
    if (err == EINPROGRESS || err == EINTR) {
      pollfd p{s.fd(), POLLOUT, 0};
      if (::poll(&p, 1, int(timeout.count())) <= 0) return Liveness::unknown;
      socklen_t len = sizeof err;
      if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return Liveness::unknown;
    }
  }
  if (err == ECONNREFUSED) return Liveness::refused;
  if (err != 0) return Liveness::unknown;
  unsigned char magic[4];
  wire::store_u32(magic, kProbeMagic);
  (void)::send(s.fd(), magic, sizeof magic, MSG_NOSIGNAL | MSG_DONTWAIT);
  return Liveness::alive;  // the socket closes here
}

}  // namespace dpt::tcp
