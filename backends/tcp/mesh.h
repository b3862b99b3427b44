#pragma once
// Building the full mesh of the tcp backend.
//
// Terms:
//   mesh     - one TCP connection between every pair of ranks.
//   scheme   - rank i connects to every rank j > i and accepts from every rank j < i,
//              so each pair has exactly one connection and nobody waits on a cycle.
//   prefix   - the store namespace of one communicator: "<prefix>/addr/<r>" holds rank
//              r's listening address ("host port"), "<prefix>/job" the job id rank 0
//              drew at random; both are checked in the hello exchange (frame.h).
//   token    - the job's secret; each connection proves both ways that its ends know
//              it (frame.h: hello, ack, proofs) before it joins the mesh.
// The listener is bound to listen_host only and lives only while the mesh is built;
// connections that do not complete the handshake (port scanners, stray clients,
// garbage, another job) are closed and logged, and do not disturb the ranks that are
// still connecting.
#include <string>
#include <vector>

#include "comm/error.h"
#include "comm/socket.h"
#include "comm/store/store.h"

namespace dpt::tcp {

struct MeshConfig {
  int rank = 0;
  int world = 1;
  std::string listen_host;     // from net::choose_listen_host()
  net::Family family = net::Family::any;
  std::string prefix;          // store namespace of this communicator
  uint64_t comm_id = 0;
  std::string token;           // job token (comm/job_token.h); never logged
  Millis timeout{120000};      // rendezvous and connection deadline
  ErrorContext ctx;            // rank/backend for error messages
};

struct Mesh {
  std::vector<net::Socket> peers;  // peers[r] connects to rank r; peers[rank] is empty
  uint64_t job_id = 0;
  int64_t rejected_connections = 0;  // stray connections dropped during the build
};

// Collective over all ranks of the store's job. Throws TimeoutError (naming missing or
// unreachable ranks), PeerError, UsageError (duplicate rank) or MismatchError.
Mesh build_mesh(Store& store, const MeshConfig& cfg);

}  // namespace dpt::tcp
