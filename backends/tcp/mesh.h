#pragma once
// The tcp backend's connections: the eager part built with the communicator, and the
// pieces that make the rest on demand (connector.h).
//
// Terms:
//   eager    - the pairs connected while the communicator is built: those
//              MeshConfig::eager names (the tcp backend names none: even same-host pairs,
//              whose shared-memory rings ring their doorbells over the socket, connect on
//              demand), or every pair when it is empty (full mesh).
//   on demand- every other pair is connected by the first operation that needs it
//              (connector.h): the lower rank dials, the higher waits for it.
//   scheme   - rank i dials ranks j > i and accepts from ranks j < i, so each pair has
//              exactly one connection and nobody waits on a cycle.
//   prefix   - the store namespace of one communicator: "<prefix>/addr/<r>" holds rank
//              r's listening address ("host port"), "<prefix>/job" the job id rank 0
//              drew at random; both are checked in the hello exchange (frame.h).
//   token    - the job's secret; each connection proves both ways that its ends know
//              it (frame.h: hello, ack, proofs) before it joins the mesh.
// The listener is bound to listen_host only and stays open for the communicator's life
// (Mesh::listener, handed to the connector); connections that do not complete the
// handshake (port scanners, stray clients, garbage, another job) are closed and logged,
// and do not disturb the ranks that are still connecting.
#include <functional>
#include <string>
#include <vector>

#include "comm/error.h"
#include "comm/net/socket.h"
#include "comm/store/store.h"

namespace dpt::tcp {

struct MeshConfig {
  int rank = 0;
  int world = 1;
  std::string listen_host;     // from net::choose_listen_host()
  net::Family family = net::Family::any;
  std::string prefix;          // store namespace of this communicator
  uint64_t comm_id = 0;
  std::string token;           // job token (comm/store/job_token.h); never logged
  Millis timeout{120000};      // rendezvous and connection deadline
  ErrorContext ctx;            // rank/backend for error messages
  // eager[r]: connect rank r while building. Empty: every rank (full mesh).
  std::vector<bool> eager;
  // When set: called once every rank's address is published, and sets `eager` (it may
  // read the store: e.g. every rank's host). It may also fill `addresses` (its argument,
  // then the dials of this build read no store key per peer).
  std::function<std::vector<bool>(std::vector<std::string>& addresses)> decide_eager;
  // When set: called once this rank's address is published, before it joins the
  // rendezvous, to publish more (every rank's is there once the rendezvous completes).
  std::function<void()> publish_more;
  // When set: rank r, not yet at the rendezvous, never will be (see rendezvous()).
  std::function<bool(int rank)> gone;
  // Every rank's listening address ("host port"), once known (gather_addresses): a dial
  // then needs no store, so ranks meeting for the first time after rank 0 (which serves
  // the store) exited still find each other. Empty: looked up in the store.
  std::vector<std::string> addresses;
};

// Every rank's address, once all have joined the rendezvous (each published its own
// before): rank 0 reads the P keys and publishes them as one ("<prefix>/addrs"), which
// the others read with one request: about 2P store requests in all, where each rank
// reading every key would take P(P-1). Call it where every rank waits for rank 0 anyway
// (the tcp backend's decide_eager, with the host digests).
std::vector<std::string> gather_addresses(Store& store, const MeshConfig& cfg, Millis timeout);

struct Mesh {
  std::vector<net::Socket> peers;  // peers[r] connects to rank r; empty: not (yet) connected
  uint64_t job_id = 0;
  int64_t rejected_connections = 0;  // stray connections dropped during the build
  net::Listener listener;            // still open: later connections arrive here
  // Wall-clock milestones of the store part (ms since the epoch, comparable across the
  // ranks of one host; bench/tcp_connections.sh): this rank begins to publish (its store
  // client connects on that first request), has published its address, has met every
  // rank (rendezvous and job id read), and has decided its eager peers.
  double arrived_at_ms = 0, published_at_ms = 0, joined_at_ms = 0, eager_decided_at_ms = 0;
};

// Collective over all ranks of the store's job. Throws TimeoutError (naming missing or
// unreachable ranks), PeerError, UsageError (duplicate rank) or MismatchError. Lower
// ranks that connect on demand while this rank still builds are kept in Mesh::peers.
Mesh build_mesh(Store& store, const MeshConfig& cfg);

// Accepting lower ranks' connections on `listener` (handshake of frame.h) until done()
// or `deadline` (then TimeoutError naming the ranks still missing by connected()).
// deliver() gets each authenticated connection (blocking socket, tuned).
// wake_fd: an eventfd that becomes readable when done() may have turned true; with it
// the loop sleeps until a connection, that event or the deadline (without it, it looks
// at done() every 100 ms).
struct AcceptHooks {
  std::function<bool(int rank)> connected;
  std::function<void(int rank, net::Socket)> deliver;
  std::function<bool()> done;
  int wake_fd = -1;
  int64_t rejected = 0;
};
void accept_lower_ranks(net::Listener& listener, const MeshConfig& cfg, uint64_t job_id, AcceptHooks& hooks,
                        net::Clock::time_point deadline);

// Connects to the higher rank `peer` (its address from the store) and runs the hello;
// throws TimeoutError or PeerError naming it. Refused connections are retried until
// `connect_by` (at most `deadline`): during the build the peer may not listen yet; on
// demand its listener has been open since the build, so a refusal means it is gone.
net::Socket dial_peer(Store& store, const MeshConfig& cfg, uint64_t job_id, int peer, net::Clock::time_point deadline,
                      net::Clock::time_point connect_by = net::Clock::time_point::max());

}  // namespace dpt::tcp
