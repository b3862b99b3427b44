#include "backends/tcp/connector.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "backends/tcp/liveness_probe.h"
#include "comm/net/log.h"

namespace dpt::tcp {

// How long an on-demand dial retries a refused connect (a full backlog or a lost SYN on
// a loaded host) before it takes the peer for gone: its listener is open from the
// build on, so refusals beyond this mean the process exited.
constexpr Millis kConnectWindow{3000};
// A watched rank's listener refusing for this long, probed every kProbeEvery, is gone
// (the same reasoning as kConnectWindow, from the side that waits).
constexpr Millis kGoneAfter{2000};
constexpr Millis kProbeEvery{1000};

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
  int wake_fd = -1;             // eventfd: the acceptor's poll wakes on stop()
  std::condition_variable probe_cv;  // with mu: a new watch, or stop
  std::vector<int> watched;          // lower ranks waited for, not yet connected

  ~State() {
    if (wake_fd >= 0) ::close(wake_fd);
  }

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
  state_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (state_->wake_fd < 0) throw net::SocketError("eventfd: " + net::errno_string(errno), errno);
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
    hooks.wake_fd = st->wake_fd;
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

void Connector::watch(int peer) {
  std::lock_guard<std::mutex> lk(state_->mu);
  if (state_->stopped || state_->connected[size_t(peer)]) return;
  if (std::find(state_->watched.begin(), state_->watched.end(), peer) != state_->watched.end()) return;
  state_->watched.push_back(peer);
  if (!prober_.joinable()) prober_ = std::thread([st = state_] { probe_watched(*st); });
  state_->probe_cv.notify_all();
}

// The prober thread: every kProbeEvery, each watched rank's listener once; asleep on
// probe_cv when nothing is watched.
void Connector::probe_watched(State& st) {
  struct Seen {
    std::string host;
    int port = 0;
    net::Clock::time_point refused_since = net::Clock::time_point::max();
  };
  std::vector<Seen> seen(st.connected.size());
  std::unique_lock<std::mutex> lk(st.mu);
  for (;;) {
    std::erase_if(st.watched, [&](int r) { return bool(st.connected[size_t(r)]); });
    if (st.stopped) return;
    if (st.watched.empty()) {
      st.probe_cv.wait(lk);
      continue;
    }
    const std::vector<int> now_watched = st.watched;
    lk.unlock();
    std::vector<std::pair<int, std::string>> gone;
    for (int r : now_watched) {
      Seen& s = seen[size_t(r)];
      try {
        if (s.host.empty()) {  // published at the build: there already
          const std::string v = st.store->get(st.cfg.prefix + "/addr/" + std::to_string(r), kProbeEvery);
          const auto sp = v.rfind(' ');
          if (sp == std::string::npos) continue;
          s.port = std::atoi(v.c_str() + sp + 1);
          s.host = v.substr(0, sp);
        }
      } catch (const std::exception&) {
        continue;  // the store is slow or gone: no verdict this round
      }
      const auto now = net::Clock::now();
      if (probe_listener(s.host, s.port, st.cfg.family, kProbeEvery) != Liveness::refused) {
        s.refused_since = net::Clock::time_point::max();
        continue;
      }
      if (s.refused_since == net::Clock::time_point::max()) s.refused_since = now;
      if (now - s.refused_since >= kGoneAfter)
        gone.emplace_back(r, fmt::format("it never dialed this rank, and its listener at {}:{} has refused "
                                         "connections for {} s: the process is gone",
                                         s.host, s.port, kGoneAfter.count() / 1000));
    }
    for (auto& [r, why] : gone) st.hand_over(r, net::Socket(), why);  // hand_over locks mu
    lk.lock();
    for (auto& [r, why] : gone) std::erase(st.watched, r);
    st.probe_cv.wait_for(lk, kProbeEvery, [&] { return st.stopped; });
  }
}

void Connector::stop() {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stopped = true;
    state_->probe_cv.notify_all();
  }
  state_->stop_flag = true;
  const uint64_t one = 1;
  (void)!::write(state_->wake_fd, &one, sizeof one);
  if (acceptor_.joinable()) acceptor_.join();
  if (prober_.joinable()) prober_.join();
  state_->listener.sock.close();
}

}  // namespace dpt::tcp
