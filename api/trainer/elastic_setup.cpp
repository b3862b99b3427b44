#include "api/trainer/elastic_setup.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "backends/tcp/tcp_backend.h"
#include "comm/dispatch/flight_request.h"
#include "comm/launch/env.h"
#include "comm/launch/launch_env.h"
#include "comm/store/job_token.h"

namespace train {

namespace {

std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw std::invalid_argument(std::string("--elastic: ") + name +
                                " is not set: start elastic jobs with build/bin/launch --elastic -n MIN:MAX");
  return v;
}

int env_int(const char* name) {
  const std::string v = required_env(name);
  try {
    size_t used = 0;
    const int x = std::stoi(v, &used);
    if (used == v.size() && x > 0) return x;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(std::string("--elastic: ") + name + "='" + v + "' is not a positive integer");
}

dpt::Millis seconds_env(const char* name) {
  const double s = dpt::env::get_double(name);
  if (!(s > 0)) throw std::invalid_argument(std::string(name) + " must be positive");
  return dpt::Millis(int64_t(s * 1000));
}

}  // namespace

void check_elastic_launch(bool elastic) {
  const char* id = std::getenv(dpt::env::kElasticId);
  const bool under_elastic_launch = id && *id;
  if (under_elastic_launch && !elastic)
    throw std::invalid_argument(std::string("this process was started by launch --elastic (") + dpt::env::kElasticId + "=" +
                                id + "), whose launcher serves the rendezvous store on MASTER_PORT itself, but train "
                                "was not given --elastic: add --elastic to train's flags (build/bin/launch --elastic -n "
                                "MIN:MAX build/bin/train --elastic ...), or drop --elastic from launch for a fixed-size job");
  if (elastic && !under_elastic_launch) {
    const dpt::LaunchInfo li = dpt::detect_launch();
    const std::string by = li.source == "single"     ? "no launcher (a single process)"
                           : li.source == "torchrun" ? "a plain launch or torchrun"
                           : li.source == "openmpi"  ? "mpirun (Open MPI)"
                           : li.source == "slurm"    ? "srun (Slurm)"
                                                     : "an MPI launcher (" + li.source + ")";
    throw std::invalid_argument("--elastic needs the launcher's rendezvous store, but this process was started by " + by +
                                ", which cannot re-form a job (" + dpt::env::kElasticId +
                                " is not set): start it as build/bin/launch --elastic -n MIN:MAX build/bin/train --elastic "
                                "..., or leave --elastic out");
  }
}

std::optional<ElasticSetup> elastic_setup(const dpt::CommOptions& options, const std::string& refuse_join) {
  const std::string id = required_env(dpt::env::kElasticId);
  const std::string addr = required_env("MASTER_ADDR");
  const int port = env_int("MASTER_PORT");
  dpt::ElasticLimits limits;
  limits.min = env_int(dpt::env::kElasticMin);
  limits.max = env_int(dpt::env::kElasticMax);
  limits.settle = seconds_env(dpt::env::kElasticSettleS);
  const dpt::Millis rdzv_timeout = seconds_env(dpt::env::kRendezvousTimeoutS);
  // A generation must wait for survivors still stuck making the previous generation's
  // communicator (a member died or stopped during it: they wait up to the rendezvous
  // timeout). Waiting only the collective timeout, the quick ones gave up below the
  // minimum, rank 0 among them, and the job died (issue 31: a join during a stop).
  limits.timeout = std::max(options.timeout, rdzv_timeout);
  const std::string token = dpt::job_token_from_env();

  ElasticSetup s;
  s.store = std::make_shared<dpt::TcpStoreClient>(addr, port, rdzv_timeout,
                                                  dpt::ErrorContext{-1, -1, "tcp", "elastic store", -1, -1}, token);
  s.rendezvous = std::make_unique<dpt::ElasticRendezvous>(*s.store, id, limits);
  // The launcher's store, which outlives every generation, can ask for flight records.
  dpt::watch_flight_requests(addr, port, token);
  s.make_comm = [store = s.store, addr, token, rdzv_timeout, options](const dpt::Membership& m) {
    dpt::TcpStoreRendezvous r;
    r.rank = m.rank;
    r.world_size = m.size();
    r.store = store;
    r.prefix = "elastic/g" + std::to_string(m.generation) + "/tcp";
    r.comm_id = uint64_t(m.generation) + 1;  // peers of another generation are turned away at connect
    r.peer_hint = addr;
    r.job_token = token;
    r.timeout = rdzv_timeout;
    // A member that died after the list closed (its launcher marked it dead) fails the
    // build at once; its peers re-form without waiting out the rendezvous timeout.
    r.gone = [store, ids = m.ids](int rank) { return store->check("elastic/dead/" + ids[size_t(rank)]); };
    return dpt::create_tcp_communicator_in_store(r, options);
  };
  // A job already running (this is a restarted or late process): arrive as a newcomer.
  // The first store call waits out a store still starting (up to the rendezvous timeout);
  // nothing answering by then means the job is over (ElasticStoreUnreachable).
  int current = -1;
  try {
    current = s.rendezvous->current();
  } catch (const std::exception& e) {
    throw dpt::ElasticStoreUnreachable("elastic: " + id + " cannot reach the rendezvous store at " + addr + ":" +
                                       std::to_string(port) + " (" + e.what() +
                                       "): node 0's launcher, which serves it, has ended or this host is cut off");
  }
  s.joining = current >= 0;
  if (s.joining && !refuse_join.empty())
    throw dpt::ElasticError("elastic: " + id + " found the job running (generation " + std::to_string(current) + "), but " +
                            refuse_join + " cannot take a restarted process back into a running group: start the job "
                            "without --max-restarts");
  for (;;) {
    s.membership = s.rendezvous->form(s.joining ? current + 1 : 0, -1);
    if (!s.membership.excluded()) {
      if (!s.joining) {  // the job's start: every member fails alike, as before
        s.comm = s.make_comm(s.membership);
        return s;
      }
      try {
        s.comm = s.make_comm(s.membership);
        return s;
      } catch (const dpt::CommError& e) {
        // A member died or stopped while the group built its communicator: the members
        // re-form in the next generation (DistTrainer::reform), so a newcomer, which holds
        // no state, arrives there too instead of exiting and spending a launcher restart.
        if (dynamic_cast<const dpt::UsageError*>(&e) || dynamic_cast<const dpt::MismatchError*>(&e)) throw;
        std::fprintf(stderr, "elastic: %s: generation %d did not form (%s): joining the next one\n",
                     s.rendezvous->id().c_str(), s.membership.generation, e.what());
        current = s.membership.generation;
        continue;
      }
    }
    if (s.rendezvous->done()) return std::nullopt;
    s.joining = true;  // the group was full or closed before we came: the next one
    current = s.rendezvous->current();
  }
}

}  // namespace train
