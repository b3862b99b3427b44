#include "backends/tcp/connector.h"

#include "comm/log.h"

namespace dpt::tcp {

// How long an on-demand dial retries a refused connect (a full backlog or a lost SYN on
// a loaded host) before it takes the peer for gone: its listener is open from the
// build on, so refusals beyond this mean the process exited.
constexpr Millis kConnectWindow{3000};

struct Connector::State {
  std::shared_ptr<Store> store;
  MeshConfig cfg;
  uint64_t job_id = 0;
  net::Listener listener;
  std::mutex mu;                // guards the fields below and every sink call
  bool stopped = false;
  std::vector<bool> connected;  // a connection exists (built, accepted or dialed)
  Sink sink;
  std::atomic<bool> stop_flag{false};

  void hand_over(int peer, net::Socket s, const std::string& error) {
    std::lock_guard<std::mutex> lk(mu);
    if (stopped) return;  // the socket closes here
    if (error.empty()) connected[size_t(peer)] = true;
    sink(peer, std::move(s), error);
  }
};

Connector::Connector(std::shared_ptr<Store> store, MeshConfig cfg, uint64_t job_id, net::Listener listener,
                     const std::vector<net::Socket>& connected)
    : state_(std::make_shared<State>()) {
  state_->store = std::move(store);
  state_->cfg = std::move(cfg);
  state_->job_id = job_id;
  state_->listener = std::move(listener);
  state_->connected.resize(connected.size());
  for (size_t r = 0; r < connected.size(); ++r) state_->connected[r] = connected[r].valid();
}

Connector::~Connector() { stop(); }

void Connector::start(Sink sink) {
  state_->sink = std::move(sink);
  acceptor_ = std::thread([st = state_] {
    AcceptHooks hooks;
    hooks.connected = [&](int r) {
      std::lock_guard<std::mutex> lk(st->mu);
      return bool(st->connected[size_t(r)]);
    };
    hooks.deliver = [&](int r, net::Socket s) { st->hand_over(r, std::move(s), ""); };
    hooks.done = [&] { return st->stop_flag.load(); };
    try {
      accept_lower_ranks(st->listener, st->cfg, st->job_id, hooks, net::Clock::time_point::max());
    } catch (const std::exception& e) {
      // Only poll() itself can fail here; ranks that still need to connect then time out.
      log::warn("tcp: stopped accepting connections: {}", e.what());
    }
  });
}

void Connector::dial(int peer, Millis timeout) {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->stopped) return;
  }
  // Detached: a dial to a dead host may wait out its deadline, and must not hold up the
  // communicator's destruction. It keeps the state (and the store) alive meanwhile.
  std::thread([st = state_, peer, timeout] {
    try {
      const auto now = net::Clock::now();
      net::Socket s = dial_peer(*st->store, st->cfg, st->job_id, peer, now + timeout, now + kConnectWindow);
      st->hand_over(peer, std::move(s), "");
    } catch (const std::exception& e) {
      st->hand_over(peer, net::Socket(), e.what());
    }
  }).detach();
}

void Connector::stop() {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stopped = true;
  }
  state_->stop_flag = true;
  if (acceptor_.joinable()) acceptor_.join();
  state_->listener.sock.close();
}

}  // namespace dpt::tcp
