#pragma once
// Connections on demand: the pairs the communicator did not connect while it was built
// (mesh.h, "eager") are connected when an operation first needs them.
//
// Terms:
//   connector - owns the communicator's listener for its whole life and a thread that
//               accepts lower ranks' connections on it (the handshake of frame.h, stray
//               connections rejected as during the build); dials higher ranks when the
//               engine asks (dial()), each dial on its own short-lived thread.
//   rule      - the lower rank of a pair dials, as in the mesh: the engine asks for a
//               dial when an op (send or receive) is posted for a higher rank; ops for a
//               lower rank wait until that rank posts its own op for us and dials. A
//               point-to-point message needs ops on both ends, so the dial comes, and a
//               pair never gets two connections.
//   sink      - where connections and dial failures go (the engine's adopt()); never
//               called once stop() has returned.
//   watch     - a lower rank this rank waits for (an op is posted for it, no connection
//               yet): a prober thread probes its listener every second
//               (liveness_probe.h); refused for kGoneAfter on end, it is gone, and the
//               sink gets a failure naming it, so the wait ends within seconds instead of
//               at the op timeout (a ring's other neighbour may notice nothing: a
//               point-to-point receive, or a tree, waits on that rank alone).
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/tcp/mesh.h"

namespace dpt::tcp {

class Connector {
 public:
  // error empty: `sock` connects to `peer`; else the dial failed and `error` says why.
  using Sink = std::function<void(int peer, net::Socket sock, const std::string& error)>;

  // `connected[r]`: the build already connected rank r.
  Connector(std::shared_ptr<Store> store, MeshConfig cfg, uint64_t job_id, net::Listener listener,
            const std::vector<net::Socket>& connected);
  ~Connector();  // stop()
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  void start(Sink sink);            // starts accepting
  void dial(int peer, Millis timeout);  // asynchronous; any thread
  void watch(int peer);                 // asynchronous; any thread; lower ranks
  void stop();                      // stops accepting and probing; later dial() calls do nothing

 private:
  struct State;
  static void probe_watched(State& st);
  std::shared_ptr<State> state_;  // shared with the dial threads (they may outlive us)
  std::thread acceptor_;
  std::thread prober_;  // started by the first watch()
};

}  // namespace dpt::tcp
