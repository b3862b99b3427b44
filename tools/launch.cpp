// launch: start the local ranks of a program, torchrun-style, with no MPI.
//
//   build/bin/launch -n 4 [--master-port P] [--grace-s S] prog args...
//   build/bin/launch --elastic -n 2:4 --max-restarts 3 prog args...
//
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
// (a free port unless given), and COMM_JOB_TOKEN: the caller's, or a fresh random secret
// when unset, so the job's connections are authenticated (comm/store/job_token.h). Every line
// a rank prints is prefixed "[rank r] " (stdout to stdout, stderr to stderr, whole lines
// only, so ranks never interleave mid-line). When a rank fails (non-zero exit or a
// signal) the others get SIGTERM, then SIGKILL after the grace period; launch says which
// rank died and how, and exits non-zero: with the failed rank's exit code, or
// 128+signal. SIGINT/SIGTERM sent to launch are forwarded to every rank. Exit code 0
// only if every rank exits 0.
//
// Elastic (--elastic, launch/elastic_role.h): node 0's launcher serves the rendezvous
// store; a dead rank is recorded there and does not stop the others, and a slot may be
// refilled (--max-restarts) by a process that joins the running job. The job succeeds
// when the members finished training (elastic/done) and nothing failed after that.
//
// main reads as the steps; launch/job.h starts and watches the ranks (and defines a
// rank's group); options.h defines slot, -n MIN:MAX and nodes.
#include <cstdlib>
#include <memory>
#include <string>

#include "comm/launch/env.h"
#include "comm/net/shm_names.h"
#include "comm/store/job_token.h"
#include "comm/store/munge_secret.h"
#include "tools/launch/cpu_binding.h"
#include "tools/launch/elastic_role.h"
#include "tools/launch/job.h"
#include "tools/launch/options.h"
#include "tools/launch/process_io.h"

namespace {

using namespace launch;

// Set in our own environment before any fork, so every rank inherits the same one.
bool ensure_job_token(const Options& o) {
  try {
    if (!dpt::job_token_from_env().empty()) return true;
    if (o.nnodes > 1) {
      // Each node's launch is started on its own: no channel carries a secret between
      // them, except munge where the cluster runs it (comm/store/munge_secret.h).
      // Plain jobs: the ranks agree on it (COMM_JOB_TOKEN_BY_MUNGE); elastic ones: the
      // launchers do, through node 0's store (ElasticRole), before any rank starts.
      if (dpt::munge_works()) {
        ::setenv(dpt::kTokenByMunge, "1", 1);
        return true;
      }
      say("--nnodes " + std::to_string(o.nnodes) + ": set COMM_JOB_TOKEN to the same secret on every node " +
          "(`openssl rand -hex 32`; munge, which would carry one, is not running here)");
      return false;
    }
    ::setenv(dpt::env::kJobToken, dpt::generate_job_token().c_str(), 1);
    return true;
  } catch (const std::exception& e) {
    say(e.what());
    return false;
  }
}

bool choose_master_port(Options& o) {
  if (o.master_port == 0) o.master_port = free_port();
  if (o.master_port != 0) return true;
  say("could not find a free port on 127.0.0.1; pass --master-port");
  return false;
}

// Node 0 serves the rendezvous store, the others reach it; null (having said why) when
// that fails.
std::unique_ptr<ElasticRole> join_elastic_job(const Options& o) {
  try {
    return std::make_unique<ElasticRole>(o);
  } catch (const std::exception& e) {
    say(std::string("elastic: ") + (o.node_rank == 0 ? "cannot serve the rendezvous store at " : "cannot reach the store at ") +
        o.master_addr + ":" + std::to_string(o.master_port) + ": " + e.what());
    return nullptr;
  }
}

// Removes the /dev/shm objects whose creators are dead (comm/net/shm_names.h): at the end
// of every job, so a rank killed between making an object and unlinking it (SIGKILL, the
// OOM killer) leaves nothing behind; with `legacy`, for --cleanup-shm, older builds' too.
void reclaim_shm(bool legacy) {
  const dpt::ShmReclaim r = dpt::reclaim_dead_shm(legacy);
  if (!r.removed.empty())
    say("removed " + std::to_string(r.removed.size()) + " shared-memory object(s) (" +
        std::to_string(r.removed_bytes >> 20) + " MiB) that dead processes left in /dev/shm");
  if (legacy)
    say("/dev/shm: " + std::to_string(r.removed.size()) + " dpt object(s) removed, " + std::to_string(r.live) +
        " in use kept, " + std::to_string(r.foreign) + " of another pid namespace kept");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int exit_code = 2;
  if (!parse(argc, argv, o, exit_code)) return exit_code;
  if (o.cleanup_shm) {
    reclaim_shm(true);
    return 0;
  }
  if (!ensure_job_token(o) || !choose_master_port(o)) return 2;
  o.slot_cpus = launch::plan_binding(o);
  if (o.bind == "cores") launch::say("--bind cores: " + launch::binding_text(o, o.slot_cpus));
  if (!launch::set_thread_env(o)) return 2;
  std::unique_ptr<ElasticRole> elastic;
  if (o.elastic && !(elastic = join_elastic_job(o))) return 2;
  if (!route_signals()) return 2;
  Job job(o, elastic.get());
  if (!job.start_ranks()) return 2;
  job.supervise();
  job.finish();
  reclaim_shm(false);
  return job.exit_code();
}
