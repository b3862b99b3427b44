// net::peer_has_our_address (comm/net/socket.h): the tcp backend turns keepalive off for
// a peer on this host (mesh.cpp, tune), whose death this kernel reports itself; 130,816
// idle same-host connections at 512 ranks sent enough probes to lose some and fail.
#include <catch2/catch.hpp>

#include <chrono>

#include "comm/net/socket.h"

using namespace dpt;
using namespace std::chrono_literals;

namespace {

struct Pair {
  net::Socket dialed, accepted;
};

Pair connect_to(const std::string& host) {
  net::Listener l = net::listen_on(host, 0, net::Family::ipv4);
  Pair p;
  p.dialed = net::connect_with_retry(host, l.port(), net::Clock::now() + 5s, net::Family::ipv4);
  p.accepted = net::accept_until(l.sock.fd(), net::Clock::now() + 5s);
  return p;
}

}  // namespace

TEST_CASE("peer_has_our_address: same address on both ends", "[socket]") {
  Pair p = connect_to("127.0.0.1");
  CHECK(net::peer_has_our_address(p.dialed.fd()));
  CHECK(net::peer_has_our_address(p.accepted.fd()));
}

TEST_CASE("peer_has_our_address: another address (as another host's) is not ours", "[socket]") {
  // Loopback sends to 127.0.0.2 from 127.0.0.1: the two ends' addresses differ, as
  // between two hosts.
  Pair p = connect_to("127.0.0.2");
  CHECK_FALSE(net::peer_has_our_address(p.dialed.fd()));
  CHECK_FALSE(net::peer_has_our_address(p.accepted.fd()));
}

TEST_CASE("peer_has_our_address: not a connected socket", "[socket]") {
  net::Listener l = net::listen_on("127.0.0.1", 0, net::Family::ipv4);
  CHECK_FALSE(net::peer_has_our_address(l.sock.fd()));
  CHECK_FALSE(net::peer_has_our_address(-1));
}
