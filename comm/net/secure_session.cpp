#include "comm/net/secure_session.h"

#include <sys/socket.h>

#include <cstdlib>
#include <stdexcept>

#include "comm/net/socket.h"

namespace dpt::net {
namespace {

bool endpoint_of(int fd, bool local, Endpoint& e) {
  e.len = sizeof e.addr;
  auto* sa = reinterpret_cast<sockaddr*>(&e.addr);
  return (local ? ::getsockname(fd, sa, &e.len) : ::getpeername(fd, sa, &e.len)) == 0;
}

}  // namespace

bool wants_encryption(int fd) {
  const char* v = std::getenv("COMM_TCP_ENCRYPT");
  const std::string s = v ? v : "";
  if (s == "1" || s == "on") return true;
  if (s == "0" || s == "off") return false;
  if (!s.empty() && s != "auto")
    throw std::invalid_argument("COMM_TCP_ENCRYPT='" + s + "': use auto, 1 (always) or 0 (authenticate only)");
  Endpoint local;
  if (!endpoint_of(fd, true, local)) return true;
  return !is_loopback_host(local.host());
}

std::string connection_name(int fd) {
  Endpoint local, remote;
  const std::string l = endpoint_of(fd, true, local) ? local.str() : "?";
  const std::string r = endpoint_of(fd, false, remote) ? remote.str() : "?";
  return l + " -> " + r;
}

std::shared_ptr<const SecureSession> make_session(const SessionParams& p, int fd) {
  auto s = std::make_shared<SecureSession>();
  s->cipher = p.cipher;
  s->encrypt = p.encrypt;
  const crypto::DirectionKey dial = crypto::derive_direction_key(p.secret, p.transcript, p.dial_label);
  const crypto::DirectionKey accept = crypto::derive_direction_key(p.secret, p.transcript, p.accept_label);
  s->send_key = p.dialing ? dial : accept;
  s->recv_key = p.dialing ? accept : dial;
  s->connection = connection_name(fd);
  return s;
}

}  // namespace dpt::net
