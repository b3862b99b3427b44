// A rank program (run under build/bin/launch) that shows how many TCP connections the
// tcp backend opens (connector.h: connections on demand) and that collectives over them
// are right. Each rank builds the world communicator from the environment
// (backends::create), runs a barrier and an allreduce of 4 KiB and one of 1 MiB, checks
// both exactly against the sums computed here, and prints one line:
//   probe rank R connections C sockets S rendezvous_ms A first_ms B rss_kib K ok 1
//         arrived_at T published_at U joined_at V eager_decided_at W
// connections: TcpCommunicator::stats().connections (leave out with --no-stats to run
// against a library without that counter); sockets: socket fds in /proc/self/fd (the
// store client, the listener and, on rank 0, the store server's are in it too);
// rendezvous_ms: building the communicator; first_ms: the barrier and both allreduces;
// the store part of the build (TcpCommunicator::build_times, 0 with --no-stats), as
// wall-clock milestones (ms since the epoch): this rank starts publishing (its store
// client connects then), has published its address, has met every rank, has read every
// rank's host; store_requests: the requests this rank sent to the store while building
// (-1 with --no-stats); first_done_at: wall clock (ms since the epoch) when its barrier
// and first allreduces were done; barrier_us / allreduce4k_us: with --latency N, the mean
// of N barriers and of N 4 KiB allreduces (0 without).
//
//         store_requests Q first_done_at F barrier_us X allreduce4k_us Y
//   tcp_connections_probe [--algo ring|auto] [--expect-connections N] [--no-stats]
//                         [--exit-rank R [--only-higher-waits]] [--latency N]
//                         [--max-store-requests N] [--no-keepalive]
//
// --algo ring: the allreduces run the ring algorithm and the barriers are left out (the
// dissemination barrier talks to ranks at distance 1, 2, 4...), so each rank needs its
// two ring neighbours only.
// --expect-connections N: exit 5 unless this rank made exactly N connections and holds no
// more sockets than those, its listener, its store client and its flight-request watcher's
// store connection (rank 0: and the store server's listener and its connections).
// --exit-rank R: rank R leaves (exit 0, no goodbye) right after building the
// communicator, before it connected to anyone on demand: the others must fail promptly
// with an error naming a rank instead of waiting out COMM_TIMEOUT_S.
// --only-higher-waits (with --exit-rank R < world - 1): instead of the allreduces, the
// last rank receives from rank R and every other rank receives from the last rank, so
// the last rank alone could notice that R is gone (R never dials it; nobody sends to R).
// --rank0-leaves-first: once every rank told rank 0 it has built its communicator, rank 0
// closes it (cleanly) and returns; the others wait until rank 0's store port
// (MASTER_ADDR:MASTER_PORT) refuses connections (exit 6 if it still accepts after 20 s),
// then rank 1 sends a word to rank 2 (a first contact, after the store rank 0 served is
// gone) and rank 2 receives it: a dial must not need the store (the trainer's last
// barrier meets partners it never talked to after rank 0 is through).
// --max-store-requests N: exit 7 unless every rank but 0 sent at most N requests to the
// store while building (the gatherer, rank 0, makes O(ranks): comm/store/store_gather.h).
// --no-keepalive: exit 8 if any socket of this rank has SO_KEEPALIVE on (every peer on
// this host: its death closes the connection here; probes on P-1 idle connections per
// rank overflowed loopback at 512 ranks).
// Exit codes: 0 ok; 3 a CommError (text on stderr); 4 wrong result; 5 connection count;
// 6 rank 0's store still up; 7 store requests; 8 keepalive; 2 bad usage.
#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backends/registry.h"
#include "backends/tcp/tcp_communicator.h"
#include "comm/launch/env.h"
#include "tests/support/proc_self.h"

using namespace dpt;
using Clock = std::chrono::steady_clock;

namespace {

// The tcp world starts this process's flight-request watcher unless recording is off.
bool flight_watcher_on() { return env::get_bool("DPT_FLIGHT"); }

// Sockets of this process with SO_KEEPALIVE on: the backend turns it on only for peers
// at another address (mesh.cpp, tune), so ranks of one host hold none.
int keepalive_sockets() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    int on = 0;
    socklen_t len = sizeof on;
    if (e->d_name[0] != '.' && ::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len) == 0 && on) ++n;
  }
  ::closedir(d);
  return n;
}

// Whether a TCP connection to host:port is refused now (nothing listens there).
bool refused(const char* host, const char* port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(host, port, &hints, &res) != 0) return false;
  bool all_refused = true;
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const bool no = ::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == ECONNREFUSED;
    ::close(fd);
    all_refused = all_refused && no;
  }
  ::freeaddrinfo(res);
  return all_refused;
}

// Waits until rank 0's store (MASTER_ADDR:MASTER_PORT, as launch set them) refuses
// connections: its server is gone, not merely presumed gone after a while.
bool store_gone(double timeout_s) {
  const char* host = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (!host || !port) return false;
  const auto until = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (!refused(host, port)) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Mean time of one barrier and of one 4 KiB allreduce over `rounds` of each, after one
// of each unmeasured (bench/scale_hosts.sh sets it against Open MPI's mpi_startup_probe).
struct Latency {
  double barrier_us = 0, allreduce4k_us = 0;
};
Latency measure_latency(Communicator& comm, int rounds, bool no_barrier) {
  std::vector<float> buf(1024, 1.0f);
  const Buffer b{buf.data(), buf.size(), DType::f32, Device{}};
  auto us_per = [&](auto&& op) {
    op();
    const auto t = Clock::now();
    for (int i = 0; i < rounds; ++i) op();
    return std::chrono::duration<double, std::micro>(Clock::now() - t).count() / rounds;
  };
  Latency l;
  if (!no_barrier) l.barrier_us = us_per([&] { comm.barrier(); });
  l.allreduce4k_us = us_per([&] { comm.allreduce(b, ReduceOp::sum); });
  return l;
}

// Small integers, so every sum is exact in float whatever the reduction order.
float value(int rank, size_t i) { return float(rank % 7) + float(i % 5); }

bool allreduce_is_right(Communicator& comm, size_t count) {
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = value(comm.rank(), i);
  comm.allreduce(Buffer{buf.data(), count, DType::f32, Device{}}, ReduceOp::sum);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < comm.size(); ++r) want += value(r, i);
    if (buf[i] != want) {
      std::fprintf(stderr, "rank %d: allreduce of %zu floats: element %zu is %g, expected %g\n", comm.rank(), count, i,
                   double(buf[i]), double(want));
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string algo = "auto";
  long expect = -1;
  bool stats = true;
  long exit_rank = -1;
  bool only_higher_waits = false, rank0_leaves = false;
  int latency_rounds = 0;
  long max_store_requests = -1;
  bool no_keepalive = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--algo" && i + 1 < argc) algo = argv[++i];
    else if (a == "--expect-connections" && i + 1 < argc) expect = std::atol(argv[++i]);
    else if (a == "--no-stats") stats = false;
    else if (a == "--exit-rank" && i + 1 < argc) exit_rank = std::atol(argv[++i]);
    else if (a == "--only-higher-waits") only_higher_waits = true;
    else if (a == "--rank0-leaves-first") rank0_leaves = true;
    else if (a == "--latency" && i + 1 < argc) latency_rounds = std::atoi(argv[++i]);
    else if (a == "--max-store-requests" && i + 1 < argc) max_store_requests = std::atol(argv[++i]);
    else if (a == "--no-keepalive") no_keepalive = true;
    else {
      std::fprintf(stderr, "tcp_connections_probe: unknown or incomplete argument '%s' (see the file's header)\n",
                   a.c_str());
      return 2;
    }
  }
  try {
    const auto t0 = Clock::now();
    std::unique_ptr<Communicator> comm = backends::create("tcp");
    const auto t1 = Clock::now();
    if (comm->rank() == exit_rank) ::_exit(0);
    if (rank0_leaves) {
      if (comm->size() < 3) {
        std::fprintf(stderr, "--rank0-leaves-first needs 3 ranks or more\n");
        return 2;
      }
      const int r = comm->rank();
      // Every rank has built its communicator (so needs the store no more) before rank 0
      // leaves: each tells rank 0, over connections with rank 0 only.
      float ready = 1;
      if (r != 0) comm->send(Buffer{&ready, 1, DType::f32, Device{}}, 0, 8);
      else
        for (int p = 1; p < comm->size(); ++p) comm->recv(Buffer{&ready, 1, DType::f32, Device{}}, p, 8);
      if (r == 0) {
        comm.reset();  // the store server goes with the communicator
        std::printf("probe rank 0 left\n");
        return 0;
      }
      if (!store_gone(20)) {
        std::fprintf(stderr, "rank %d: rank 0's store at %s:%s still accepts connections after 20 s\n", r,
                     std::getenv("MASTER_ADDR") ? std::getenv("MASTER_ADDR") : "(no MASTER_ADDR)",
                     std::getenv("MASTER_PORT") ? std::getenv("MASTER_PORT") : "(no MASTER_PORT)");
        return 6;
      }
      float word = 42;
      if (r == 1) comm->send(Buffer{&word, 1, DType::f32, Device{}}, 2, 9);
      if (r == 2) comm->recv(Buffer{&word, 1, DType::f32, Device{}}, 1, 9);
      std::printf("probe rank %d after rank 0's store refused connections: %s\n", r,
                  r > 2 ? "idle" : r == 1 ? "sent" : "received");
      return r == 2 && word != 42 ? 4 : 0;
    }
    if (only_higher_waits) {
      const int last = comm->size() - 1;
      if (exit_rank < 0 || exit_rank >= last) {
        std::fprintf(stderr, "--only-higher-waits needs --exit-rank below the last rank (%d)\n", last);
        return 2;
      }
      float word = 0;
      comm->recv(Buffer{&word, 1, DType::f32, Device{}}, comm->rank() == last ? int(exit_rank) : last, 7);
      std::printf("probe rank %d received a word nobody sent\n", comm->rank());
      return 4;
    }
    const bool ring = algo == "ring";
    if (ring) comm->set_algo(Algo::ring);
    if (!ring) comm->barrier();
    const bool ok = allreduce_is_right(*comm, 1024) && allreduce_is_right(*comm, 256 * 1024);
    const auto t2 = Clock::now();
    const double first_done_at = wall_ms();
    const Latency lat = latency_rounds > 0 ? measure_latency(*comm, latency_rounds, ring) : Latency{};
    int connections = -1;
    if (stats) connections = dynamic_cast<TcpCommunicator&>(*comm).stats().connections;
    auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    TcpCommunicator::BuildTimes bt;
    if (stats) bt = dynamic_cast<TcpCommunicator&>(*comm).build_times();
    std::printf("probe rank %d connections %d sockets %d rendezvous_ms %.1f first_ms %.1f rss_kib %ld ok %d "
                "arrived_at %.2f published_at %.2f joined_at %.2f eager_decided_at %.2f store_requests %lld "
                "first_done_at %.2f barrier_us %.1f allreduce4k_us %.1f\n",
                comm->rank(), connections, proc_self::socket_fds(), ms(t1 - t0), ms(t2 - t1), proc_self::rss_kib(), int(ok),
                bt.arrived_at_ms, bt.published_at_ms, bt.joined_at_ms, bt.eager_decided_at_ms,
                static_cast<long long>(bt.store_requests), first_done_at, lat.barrier_us, lat.allreduce4k_us);
    std::fflush(stdout);
    if (!ok) return 4;
    if (max_store_requests >= 0 && comm->rank() != 0 && bt.store_requests > max_store_requests) {
      std::fprintf(stderr, "rank %d sent %lld requests to the store while building, at most %ld expected\n",
                   comm->rank(), static_cast<long long>(bt.store_requests), max_store_requests);
      return 7;
    }
    if (no_keepalive && keepalive_sockets() != 0) {
      std::fprintf(stderr, "rank %d holds %d sockets with keepalive on, none expected (every peer is on this host)\n",
                   comm->rank(), keepalive_sockets());
      return 8;
    }
    // The counter is the backend's word; the open sockets are the kernel's. Besides its
    // connections a rank holds its listener, its store client and the flight-request
    // watcher's own store connection (parked in a get: comm/dispatch/flight_request.h;
    // none with DPT_FLIGHT=0); rank 0 also the store server's listener and two accepted
    // connections per rank. A connector that dialed every rank at start and only counted
    // the ones it used would hold more.
    const int sockets = proc_self::socket_fds();
    const int per_rank_store = flight_watcher_on() ? 2 : 1;
    const int allowed =
        int(expect) + 1 + per_rank_store + (comm->rank() == 0 ? per_rank_store * comm->size() + 1 : 0);
    if (expect >= 0 && sockets > allowed) {
      std::fprintf(stderr, "rank %d holds %d sockets, at most %d expected (%ld connections, its listener, its store "
                   "client%s%s)\n", comm->rank(), sockets, allowed, expect,
                   per_rank_store == 2 ? ", its flight-request watcher's store connection" : "",
                   comm->rank() == 0 ? ", the store server's listener and its connections from every rank" : "");
      return 5;
    }
    if (expect >= 0 && connections != expect) {
      std::fprintf(stderr, "rank %d made %d TCP connections, expected %ld (its ring neighbours only)\n", comm->rank(),
                   connections, expect);
      return 5;
    }
    if (!ring) comm->barrier();
  } catch (const CommError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  }
  return 0;
}
