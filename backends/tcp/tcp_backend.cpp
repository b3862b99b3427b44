// create_tcp_communicator: store server (rank 0), store client, mesh, communicator; and
// create_tcp_world, which fills the bootstrap from the launcher's variables.
//
// Terms:
//   prefix - the store namespace of one communicator, "tcp/<n>", where n counts the
//            tcp communicators this rank created against this store address. Ranks
//            create communicators in the same order (they are collective), so the n
//            agree without any extra round trip, and a server that outlives one
//            communicator (one passed in TcpBootstrap::server) can host the next.
#include "backends/tcp/tcp_backend.h"

#include <unistd.h>

#include <map>
#include <mutex>

#include "backends/tcp/mesh.h"
#include "backends/tcp/tcp_communicator.h"
#include "comm/dispatch/flight_request.h"
#include "comm/launch/host_identity.h"
#include "comm/launch/env.h"
#include "comm/store/job_token.h"
#include "comm/store/munge_secret.h"
#include "comm/net/log.h"
#include "comm/net/socket.h"

namespace dpt {

static uint64_t next_comm_number(const std::string& store_addr, int rank) {
  static std::mutex mu;
  static std::map<std::string, uint64_t> counters;
  std::lock_guard<std::mutex> lk(mu);
  return counters[store_addr + "#" + std::to_string(rank)]++;
}

// What every rank brings to the meeting in a store, whichever store it is.
struct MeetIn {
  int rank;
  int world;
  std::string peer_hint;  // chooses the interface to listen on (net::choose_listen_host)
  std::string token;
  std::string prefix;
  uint64_t comm_id;
  Millis timeout;
  ErrorContext ctx;
  std::function<bool(int rank)> gone = {};
};

// Every rank's host_id_digest, through the store: each rank publishes its own
// ("<prefix>/hostid/<r>") before it joins the rendezvous; once all have joined, rank 0
// reads them and publishes the whole list as one key ("<prefix>/hostids"), which every
// other rank reads with one request. The store then serves about 3P requests, where each
// rank reading every key took P(P-1) (bench/tcp_connections.sh: digests_max).
static void publish_host_digest(Store& store, const MeetIn& m) {
  store.set(m.prefix + "/hostid/" + std::to_string(m.rank), std::to_string(host_id_digest(local_host_id())));
}

static std::vector<uint64_t> gather_host_digests(Store& store, const MeetIn& m) {
  std::vector<uint64_t> out(size_t(m.world));
  if (m.rank == 0) {
    std::string all;
    for (int r = 0; r < m.world; ++r) {
      const std::string v = r == 0 ? std::to_string(host_id_digest(local_host_id()))
                                   : store.get(m.prefix + "/hostid/" + std::to_string(r), m.timeout);
      out[size_t(r)] = std::stoull(v);
      all += (r ? " " : "") + v;
    }
    store.set(m.prefix + "/hostids", all);
    return out;
  }
  const std::string all = store.get(m.prefix + "/hostids", m.timeout);
  size_t at = 0;
  for (int r = 0; r < m.world; ++r) {
    size_t used = 0;
    try {
      out[size_t(r)] = std::stoull(all.substr(at), &used);
    } catch (const std::exception&) {
      throw MismatchError(m.ctx, "the store's host list (" + m.prefix + "/hostids) has no digest for rank " +
                                     std::to_string(r) + ": another version of dpt on rank 0?");
    }
    at += used;
  }
  return out;
}

// Mesh, shared-memory channels and arena, all negotiated through `store`.
static std::unique_ptr<Communicator> meet_in_store(std::shared_ptr<Store> store, const MeetIn& m, CommOptions options,
                                                   std::shared_ptr<TcpStoreServer> server) {
  tcp::MeshConfig cfg;
  cfg.rank = m.rank;
  cfg.world = m.world;
  cfg.family = net::parse_family(env::get_string(env::kTcpFamily));
  try {
    cfg.listen_host = net::choose_listen_host(m.peer_hint);
  } catch (const net::SocketError& e) {
    throw UsageError(m.ctx, e.what());
  }
  cfg.comm_id = m.comm_id;
  cfg.prefix = m.prefix;
  cfg.timeout = m.timeout;
  cfg.gone = m.gone;
  cfg.ctx = m.ctx;
  cfg.token = m.token;
  log::set_rank(m.rank);
  // Every rank's host (comm/launch/topology.h): for the hierarchical algorithms, whatever the
  // shared-memory settings say. No pair is connected now: every connection, same-host
  // ones included, is made by the first operation that needs it (connector.h), so a host
  // of L ranks does not make L(L-1)/2 connections at start-up; a shared-memory pair's
  // socket (doorbells) comes the same way, and the arena's waits need none
  // (shm_arena.h, "state"). Read once every address is published (a rank still
  // starting must find ours).
  std::vector<uint64_t> hosts;
  std::vector<std::string> addresses;
  const bool shm_on = env::get_bool(kTcpShmEnv);
  cfg.publish_more = [&] { publish_host_digest(*store, m); };  // rank 0 reads it after the rendezvous
  cfg.decide_eager = [&](std::vector<std::string>& dial_addresses) {
    hosts = gather_host_digests(*store, m);
    addresses = tcp::gather_addresses(*store, cfg, m.timeout);
    dial_addresses = addresses;
    return std::vector<bool>(size_t(m.world), false);
  };
  tcp::Mesh mesh = tcp::build_mesh(*store, cfg);
  if (mesh.rejected_connections > 0)
    log::warn("tcp rendezvous: {} stray connection(s) were rejected", mesh.rejected_connections);
  log::debug("tcp: {} ranks met (listening on {}; connections on demand)", m.world, cfg.listen_host);

  // Same-host peers: shared-memory rings, used once their connection (doorbells) is made.
  tcp::ShmConfig shm;
  shm.rank = m.rank;
  shm.world = m.world;
  shm.enabled = shm_on;
  const int64_t ring = env::get_int(kTcpShmRingBytesEnv);
  if (ring < 4096 || (ring & (ring - 1)) != 0)
    throw std::invalid_argument("COMM_TCP_SHM_RING_BYTES must be a power of two of at least 4096");
  shm.ring_bytes = uint64_t(ring);
  const int64_t inbox = env::get_int(kTcpShmInboxBytesEnv);
  if (inbox < 4096) throw std::invalid_argument("COMM_TCP_SHM_INBOX_BYTES must be at least 4096");
  shm.inbox_bytes = uint64_t(inbox);
  const int64_t slot = env::get_int(kTcpShmSlotBytesEnv);
  if (slot < 65536 || slot % 4096 != 0)
    throw std::invalid_argument("COMM_TCP_SHM_SLOT_BYTES must be a multiple of 4096 of at least 65536");
  if (env::get_bool(kTcpShmCollEnv)) shm.arena_bytes = tcp::shm_arena_bytes(m.world, uint64_t(slot));
  shm.job_id = mesh.job_id;
  shm.comm_id = cfg.comm_id;
  shm.prefix = cfg.prefix;
  shm.timeout = m.timeout;
  shm.ctx = m.ctx;
  std::vector<tcp::ShmChannelPtr> channels = tcp::setup_shm_channels(*store, shm);
  int shm_peers = 0;
  for (const auto& ch : channels) shm_peers += ch != nullptr;
  log::debug("tcp: {} of {} peers over shared memory", shm_peers, m.world - 1);

  // Every rank on this host: the collectives can run in one shared arena instead.
  tcp::ArenaConfig arena;
  arena.rank = m.rank;
  arena.world = m.world;
  arena.enabled = env::get_bool(kTcpShmCollEnv) && shm_peers == m.world - 1;
  arena.slot_bytes = uint64_t(slot);
  arena.spin = tcp_shm_spin_from_env();
  arena.job_id = mesh.job_id;
  arena.comm_id = cfg.comm_id;
  arena.prefix = cfg.prefix;
  arena.timeout = m.timeout;
  arena.ctx = m.ctx;
  std::unique_ptr<tcp::ShmArena> coll_arena = tcp::setup_shm_arena(*store, arena);
  log::debug("tcp: collectives {}", coll_arena ? "in a shared-memory arena" : "as messages");
  const auto* store_client = dynamic_cast<const TcpStoreClient*>(store.get());
  const int64_t store_requests = store_client ? store_client->requests_sent() : -1;
  tcp::MeshConfig later = cfg;
  later.addresses = addresses;  // dials on demand need no store (rank 0 may be gone)
  later.decide_eager = nullptr;
  later.publish_more = nullptr;
  later.ctx.op = "connect";
  auto connector = std::make_unique<tcp::Connector>(store, later, mesh.job_id, std::move(mesh.listener), mesh.peers);
  auto comm = std::make_unique<TcpCommunicator>(m.rank, m.world, options, std::move(mesh.peers), std::move(store),
                                                std::move(server), std::move(channels), std::move(coll_arena),
                                                std::move(connector));
  comm->set_host_digests(hosts);
  // (mesh's sockets and listener moved on; its milestones are still there)
  comm->set_build_times(
      {mesh.arrived_at_ms, mesh.published_at_ms, mesh.joined_at_ms, mesh.eager_decided_at_ms, store_requests});
  return comm;
}

std::unique_ptr<Communicator> create_tcp_communicator(const TcpBootstrap& b, CommOptions options) {
  ErrorContext ctx{b.rank, b.world_size, "tcp", "rendezvous", -1, -1};
  if (b.world_size < 1 || b.rank < 0 || b.rank >= b.world_size)
    throw UsageError(ctx, "rank " + std::to_string(b.rank) + " is outside [0, " + std::to_string(b.world_size) +
                              "): check RANK and WORLD_SIZE");
  const Millis rdzv_timeout = env::rendezvous_timeout();
  const std::string master = b.master_addr.empty() ? std::string("127.0.0.1") : b.master_addr;
  const std::string token = b.job_token.empty() ? job_token_from_env() : b.job_token;

  std::shared_ptr<TcpStoreServer> server = b.server;
  if (b.world_size == 1) {
    // Nothing to meet: no store traffic, no sockets.
    std::vector<net::Socket> none(1);
    return std::make_unique<TcpCommunicator>(0, 1, options, std::move(none), nullptr, server);
  }
  if (const std::string refusal = open_job_refusal(token, network_exposure(master, net::choose_listen_host(master)));
      !refusal.empty())
    throw UsageError(ctx, refusal);
  if (b.rank == 0 && !server) {
    if (b.master_port <= 0)
      throw UsageError(ctx, "MASTER_PORT is not set: the other ranks cannot find rank 0's store");
    try {
      server = std::make_shared<TcpStoreServer>(master, b.master_port, token);
    } catch (const net::SocketError& e) {
      throw UsageError(ctx, std::string("rank 0 cannot serve the rendezvous store: ") + e.what() +
                                " (is MASTER_PORT in use by another job, or MASTER_ADDR not an address of this host?)");
    }
  }
  const int port = server ? server->port() : b.master_port;
  if (port <= 0) throw UsageError(ctx, "MASTER_PORT is not set");
  warn_if_no_job_token(token);
  auto store = std::make_shared<TcpStoreClient>(master, port, rdzv_timeout, ctx, token);
  const uint64_t comm_id = next_comm_number(store->address(), b.rank);
  MeetIn m{b.rank, b.world_size, master, token, "tcp/" + std::to_string(comm_id), comm_id, rdzv_timeout, ctx};
  auto comm = meet_in_store(std::move(store), m, options, std::move(server));
  // The job's store can now ask this process for its flight record (launch, mpirun).
  watch_flight_requests(master, port, token);
  return comm;
}

std::unique_ptr<Communicator> create_tcp_communicator_in_store(const TcpStoreRendezvous& r, CommOptions options) {
  ErrorContext ctx{r.rank, r.world_size, "tcp", "rendezvous", -1, -1};
  if (r.world_size < 1 || r.rank < 0 || r.rank >= r.world_size)
    throw UsageError(ctx, "rank " + std::to_string(r.rank) + " is outside [0, " + std::to_string(r.world_size) + ")");
  if (!r.store) throw UsageError(ctx, "no store to meet in");
  if (r.world_size == 1) {
    std::vector<net::Socket> none(1);
    return std::make_unique<TcpCommunicator>(0, 1, options, std::move(none), nullptr, nullptr);
  }
  if (const std::string refusal = open_job_refusal(r.job_token, network_exposure("", net::choose_listen_host(r.peer_hint)));
      !refusal.empty())
    throw UsageError(ctx, refusal);
  warn_if_no_job_token(r.job_token);
  MeetIn m{r.rank, r.world_size, r.peer_hint, r.job_token, r.prefix, r.comm_id, r.timeout, ctx, r.gone};
  return meet_in_store(r.store, m, options, nullptr);
}

// srun (or launch --nnodes, which asked by COMM_JOB_TOKEN_BY_MUNGE) started the ranks
// across hosts and nobody handed them a secret: rank 0 draws one
// and its store hands it out as munge credentials (comm/store/munge_secret.h), which only
// this user's processes on this cluster can read; every other rank asks for its own.
static void agree_on_token_by_munge(const LaunchInfo& li, TcpBootstrap& b) {
  ErrorContext ctx{li.rank, li.world_size, "tcp", "rendezvous", -1, -1};
  if (li.rank != 0) {
    b.job_token = fetch_job_token_by_munge(b.master_addr, b.master_port, env::rendezvous_timeout(), ctx);
    return;
  }
  b.job_token = generate_job_token();
  try {
    b.server = std::make_shared<TcpStoreServer>(b.master_addr, b.master_port, b.job_token);
  } catch (const net::SocketError& e) {
    throw UsageError(ctx, std::string("rank 0 cannot serve the rendezvous store: ") + e.what() +
                              " (is MASTER_PORT in use by another job, or MASTER_ADDR not an address of this host?)");
  }
  b.server->hand_out_token_by_munge();
}

std::unique_ptr<Communicator> create_tcp_world(const LaunchInfo& li, CommOptions options,
                                               const ShareFromRank0& share_from_rank0) {
  TcpBootstrap b;
  b.rank = li.rank;
  b.world_size = li.world_size;
  b.master_addr = li.master_addr.empty() ? "127.0.0.1" : li.master_addr;
  b.master_port = li.master_port;
  b.job_token = job_token_from_env();
  // Under mpirun nobody handed the ranks a secret: rank 0 draws one and shares it (trusted
  // like the launcher's environment; never over TCP, never logged). Decided on every rank
  // from the same environment, so all or none take part.
  if (share_from_rank0 && li.world_size > 1 && b.job_token.empty())
    b.job_token = share_from_rank0(li.rank == 0 ? generate_job_token() : std::string());
  if (b.job_token.empty() && li.world_size > 1 && b.master_port != 0 &&
      ((li.source == "slurm" && munge_usable() &&
        !network_exposure(b.master_addr, net::choose_listen_host(b.master_addr)).empty()) ||
       token_by_munge_asked()))
    agree_on_token_by_munge(li, b);
  if (b.master_port != 0) return create_tcp_communicator(b, options);
  if (li.world_size == 1) {
    b.server = std::make_shared<TcpStoreServer>(b.master_addr, 0, b.job_token);
    b.master_port = b.server->port();
  } else if (share_from_rank0) {
    // Rank 0 serves the store on a free port and shares "host port". On several hosts
    // without MASTER_ADDR the others reach it by rank 0's host name.
    std::string host = b.master_addr;
    if (li.master_addr.empty() && li.local_size < li.world_size) {
      char name[256] = {0};
      ::gethostname(name, sizeof(name) - 1);
      host = name;
    }
    std::string addr;
    if (li.rank == 0) {
      b.server = std::make_shared<TcpStoreServer>(host, 0, b.job_token);
      addr = host + " " + std::to_string(b.server->port());
    }
    addr = share_from_rank0(addr);
    const auto space = addr.rfind(' ');
    b.master_addr = addr.substr(0, space);
    b.master_port = std::stoi(addr.substr(space + 1));
  } else if (li.under_mpi()) {
    throw std::invalid_argument("backend tcp under an MPI launcher needs MASTER_PORT (this build has no MPI to agree on one)");
  } else {
    throw std::invalid_argument("backend tcp: MASTER_PORT is not set for a world of " + std::to_string(li.world_size) +
                                " ranks (launch with build/bin/launch, mpirun, or set MASTER_ADDR/MASTER_PORT)");
  }
  return create_tcp_communicator(b, options);
}

}  // namespace dpt
