// flight_request: asks a running job, through its rendezvous store, for every rank's flight
// record (comm/dispatch/flight_request.h), from any host that reaches the store:
//
//   COMM_JOB_TOKEN=... build/bin/flight_request --master-addr HOST --master-port PORT [--deadline-s 10]
//
// Each rank writes DPT_FLIGHT_DIR/rank<R>.json on its own host, as on SIGUSR2, and goes on
// training; this prints where each record is and names the ranks that did not answer by
// the deadline (stopped, hung or gone), and exits 1 when there are any. The store is the
// job's: rank 0's under launch or mpirun, the launcher's under launch --elastic. The job's
// secret is taken as every store client takes it: COMM_JOB_TOKEN, or a munge credential
// from the store where the job gets its secret that way (COMM_JOB_TOKEN_BY_MUNGE=1).
#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/cli/cli.h"
#include "comm/dispatch/flight_request.h"
#include "comm/store/job_token.h"
#include "comm/store/munge_secret.h"
#include "comm/store/rendezvous.h"
#include "comm/store/tcp_store.h"

namespace po = boost::program_options;

namespace {
std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
}  // namespace

int main(int argc, char** argv) {
  std::string host = env_or("MASTER_ADDR", "127.0.0.1");
  int port = std::atoi(env_or("MASTER_PORT", "0").c_str());
  double deadline_s = 10;
  int world = 0;
  std::string reason = "asked by flight_request";
  dpt::tools::Cli cli("flight_request", "flags");
  cli.help_text(
      "usage: flight_request --master-addr HOST --master-port PORT [--deadline-s S] [--reason TEXT]\n"
      "Asks every rank of a running job, through its rendezvous store, to write its flight record\n"
      "(DPT_FLIGHT_DIR/rank<R>.json on its host) and go on; names the ranks that did not answer by\n"
      "the deadline. The job's secret: COMM_JOB_TOKEN, as for the job's ranks.",
      "exit status: 0 every rank answered; 1 some did not (named), or the store could not be asked; 2 usage");
  cli.flags().add_options()
    ("master-addr", po::value(&host)->default_value(host), "the job's store: rank 0's MASTER_ADDR (launch --elastic: node 0's)")
    ("master-port", po::value(&port)->default_value(port), "the store's port (the job's MASTER_PORT)")
    ("deadline-s", po::value(&deadline_s)->default_value(deadline_s), "seconds to wait for the answers, from the start")
    ("ranks", po::value(&world)->default_value(world), "the ranks to ask, 0 to N-1 (default: the job's world size, from the store)")
    ("reason", po::value(&reason)->default_value(reason), "written into each record");
  const auto rc = cli.parse(argc, argv, [&](const po::variables_map&) {
    if (port <= 0 || port > 65535) throw std::invalid_argument("--master-port: the job's store port is needed (1-65535)");
    if (!(deadline_s > 0)) throw std::invalid_argument("--deadline-s must be positive");
    if (world < 0) throw std::invalid_argument("--ranks must be >= 0");
  });
  if (rc) return *rc;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(int64_t(deadline_s * 1000));
  const dpt::Millis budget(int64_t(deadline_s * 1000));
  const dpt::ErrorContext ctx{-1, -1, "store", "flight request", -1, -1};
  try {
    std::string token = dpt::job_token_from_env();
    if (token.empty() && dpt::token_by_munge_asked()) token = dpt::fetch_job_token_by_munge(host, port, budget, ctx);
    dpt::TcpStoreClient store(host, port, budget, ctx, token);
    store.check("flight/world");  // reaching the store and proving the secret fail here, as themselves
    dpt::FlightRequestResult r;
    try {
      r = dpt::request_flight_records(store, reason, deadline, world);
    } catch (const dpt::TimeoutError&) {
      std::fprintf(stderr, "flight_request: the store at %s:%d holds no flight/world after %g s: no rank watches it "
                           "(a job without a tcp store, with DPT_FLIGHT=0, or not started yet?)\n",
                   host.c_str(), port, deadline_s);
      return 1;
    }
    std::printf("flight_request: request %lld to %d rank(s) of the job at %s:%d\n", (long long)r.request, r.world,
                host.c_str(), port);
    for (const auto& [rank, answer] : r.answers) std::printf("rank %d: %s\n", rank, answer.c_str());
    if (r.silent.empty()) return 0;
    std::printf("no answer within %g s from rank(s) %s (stopped, hung, or gone?)\n", deadline_s,
                dpt::format_rank_list(r.silent).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flight_request: %s\n", e.what());
    return 1;
  }
}
