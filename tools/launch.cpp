// launch: start the local ranks of a program, torchrun-style, with no MPI.
//
//   build/bin/launch -n 4 [--master-port P] [--grace-s S] prog args...
//   build/bin/launch --elastic -n 2:4 --max-restarts 3 prog args...
//
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
// (a free port unless given), and COMM_JOB_TOKEN: the caller's, or a fresh random secret
// when unset, so the job's connections are authenticated (comm/job_token.h). Every line
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
// Terms: a rank's "group" is its process group (setpgid), so the kill also reaches
// anything the rank started itself; options.h defines slot, -n MIN:MAX and nodes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "comm/env.h"
#include "comm/store/job_token.h"
#include "tools/launch/elastic_role.h"
#include "tools/launch/options.h"
#include "tools/launch/process_io.h"

namespace {

using namespace launch;
using Clock = std::chrono::steady_clock;

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  bool killed_by_us = false;
  int slot = 0;
  int incarnation = 0;
  std::string id;  // elastic: the process's id in the job's memberships
  Stream out, err;
};

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = ::write(g_signal_pipe[1], &b, 1);
  (void)ignored;
  errno = saved;
}

pid_t spawn(const Options& o, const Rank& k, int out_fd, int err_fd) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child: own process group (so a kill reaches its children too), default signals.
  ::setpgid(0, 0);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGCHLD, SIG_DFL);
  ::signal(SIGPIPE, SIG_DFL);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  const std::string world = std::to_string(o.world_max()), rank = std::to_string(o.global_rank(k.slot)),
                    local = std::to_string(k.slot), local_n = std::to_string(o.nproc), port = std::to_string(o.master_port);
  ::setenv("RANK", rank.c_str(), 1);
  ::setenv("WORLD_SIZE", world.c_str(), 1);
  ::setenv("LOCAL_RANK", local.c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", local_n.c_str(), 1);
  ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
  ::setenv("MASTER_PORT", port.c_str(), 1);
  if (o.elastic) {
    // In an elastic job ranks come from the memberships; RANK/WORLD_SIZE are the start's.
    ::setenv(dpt::env::kElasticId, k.id.c_str(), 1);
    ::setenv(dpt::env::kElasticMin, std::to_string(o.world_min()).c_str(), 1);
    ::setenv(dpt::env::kElasticMax, std::to_string(o.world_max()).c_str(), 1);
  }
  std::vector<char*> args;
  for (const auto& a : o.command) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::string msg = "launch: cannot run '" + o.command[0] + "': " + std::strerror(errno) + "\n";
  write_all(2, msg);
  ::_exit(127);
}

// Starts the process of `k` (slot, incarnation, id already set) with its two pipes.
bool start(const Options& o, Rank& k) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    say(std::string("pipe: ") + std::strerror(errno));
    return false;
  }
  pid_t pid = spawn(o, k, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    say(std::string("fork: ") + std::strerror(errno));
    return false;
  }
  ::setpgid(pid, pid);  // also here: whichever runs first wins the race
  k.pid = pid;
  k.running = true;
  k.out = Stream{out[0], 1, {}};
  k.err = Stream{err[0], 2, {}};
  return true;
}

std::string prefix_of(const Options& o, const Rank& k) {
  if (!o.prefix) return "";
  const std::string r = std::to_string(o.global_rank(k.slot));
  return k.incarnation == 0 ? "[rank " + r + "] " : "[rank " + r + " restart " + std::to_string(k.incarnation) + "] ";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int exit_code = 2;
  if (!parse(argc, argv, o, exit_code)) return exit_code;
  try {
    // Set in our own environment before any fork, so every rank inherits the same one.
    if (dpt::job_token_from_env().empty()) {
      if (o.nnodes > 1) {
        say("--nnodes " + std::to_string(o.nnodes) + ": set COMM_JOB_TOKEN to the same secret on every node");
        return 2;
      }
      ::setenv(dpt::env::kJobToken, dpt::generate_job_token().c_str(), 1);
    }
  } catch (const std::exception& e) {
    say(e.what());
    return 2;
  }
  if (o.master_port == 0) o.master_port = free_port();
  if (o.master_port == 0) {
    say("could not find a free port on 127.0.0.1; pass --master-port");
    return 2;
  }
  std::unique_ptr<ElasticRole> elastic;
  if (o.elastic) {
    try {
      elastic = std::make_unique<ElasticRole>(o);
    } catch (const std::exception& e) {
      say(std::string("elastic: ") + (o.node_rank == 0 ? "cannot serve the rendezvous store at " : "cannot reach the store at ") +
          o.master_addr + ":" + std::to_string(o.master_port) + ": " + e.what());
      return 2;
    }
  }

  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    say(std::string("pipe: ") + std::strerror(errno));
    return 2;
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGCHLD, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  std::deque<Rank> ranks;  // a deque: restarts append without moving the others
  for (int r = 0; r < o.nproc; ++r) {
    Rank& k = ranks.emplace_back();
    k.slot = r;
    k.id = ElasticRole::id_for(o.node_rank, r, 0);
    if (!start(o, k)) return 2;
  }

  int first_failed = -1;        // index in ranks of the failure that stopped the job
  int last_elastic_failure = -1;  // elastic: the latest failure the job went on without
  int restarts_left = o.max_restarts;
  int interrupted_by = 0;       // signal that stopped the job
  bool stopping = false;
  Clock::time_point kill_at{};
  auto stop_all = [&](int sig) {
    for (Rank& k : ranks)
      if (k.running) {
        ::kill(-k.pid, sig);
        k.killed_by_us = true;
      }
    if (!stopping) kill_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.grace_s * 1000));
    stopping = true;
  };
  auto stop_job_for = [&](size_t r) {
    first_failed = static_cast<int>(r);
    int alive = 0;
    for (const Rank& x : ranks) alive += x.running;
    if (alive > 0)
      say("stopping the other " + std::to_string(alive) + " rank(s) (SIGTERM, SIGKILL after " +
          std::to_string(o.grace_s).substr(0, std::to_string(o.grace_s).find('.') + 2) + " s)");
    stop_all(SIGTERM);
  };
  // Elastic: a failure before training finished is survived; the slot may be refilled.
  auto survive = [&](size_t r) {
    Rank& k = ranks[r];
    elastic->mark_dead(k.id, describe_status(k.status));
    last_elastic_failure = static_cast<int>(r);
    if (restarts_left <= 0 || elastic->done()) return;
    --restarts_left;
    Rank next;
    next.slot = k.slot;
    next.incarnation = k.incarnation + 1;
    next.id = ElasticRole::id_for(o.node_rank, next.slot, next.incarnation);
    say("restarting slot " + std::to_string(k.slot) + " as " + next.id + " (" + std::to_string(o.max_restarts - restarts_left) +
        " of " + std::to_string(o.max_restarts) + " restarts); it joins the running job");
    ranks.push_back(std::move(next));
    if (!start(o, ranks.back())) stop_job_for(ranks.size() - 1);
  };
  auto reap = [&] {
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (size_t r = 0; r < ranks.size(); ++r) {
        Rank& k = ranks[r];
        if (k.pid != pid || !k.running) continue;
        k.running = false;
        k.status = status;
        if (!failed(status) || (k.killed_by_us && stopping)) continue;
        say("rank " + std::to_string(o.global_rank(k.slot)) + (o.elastic ? " (" + k.id + ")" : "") + " " +
            describe_status(status));
        if (first_failed >= 0 || interrupted_by) continue;
        if (elastic && !elastic->done()) survive(r);
        else stop_job_for(r);
      }
    }
  };

  std::vector<pollfd> fds;
  std::vector<std::pair<Stream*, std::string>> streams;  // with the owner's prefix
  Clock::time_point pipes_deadline = Clock::time_point::max();
  for (;;) {
    bool any_running = false;
    for (const Rank& k : ranks) any_running |= k.running;
    fds.clear();
    streams.clear();
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    for (Rank& k : ranks)
      for (Stream* s : {&k.out, &k.err})
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.emplace_back(s, prefix_of(o, k));
        }
    if (!any_running) {
      // Everyone exited; a grandchild may still hold a pipe open: do not wait on it long.
      if (streams.empty()) break;
      if (pipes_deadline == Clock::time_point::max()) pipes_deadline = Clock::now() + std::chrono::seconds(2);
      if (Clock::now() >= pipes_deadline) break;
    }
    int timeout = 1000;
    if (stopping && any_running) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - Clock::now()).count();
      timeout = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(ms, 1000)));
    } else if (!any_running) {
      timeout = 100;
    }
    int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno != EINTR) {
      say(std::string("poll: ") + std::strerror(errno));
      stop_all(SIGKILL);
      break;
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      unsigned char sigs[64];
      ssize_t n = ::read(g_signal_pipe[0], sigs, sizeof sigs);
      for (ssize_t j = 0; j < n; ++j) {
        int sig = sigs[j];
        if (sig == SIGCHLD) continue;  // reaped below in any case
        if (!interrupted_by && first_failed < 0) {
          interrupted_by = sig;
          say("received signal " + signal_text(sig) + ", forwarding it to every rank");
        }
        stop_all(sig);
      }
    }
    for (size_t j = 1; rc > 0 && j < fds.size(); ++j) {
      if (!fds[j].revents) continue;
      auto& [s, prefix] = streams[j - 1];
      char buf[65536];
      ssize_t n = ::read(s->fd, buf, sizeof buf);
      if (n > 0) {
        s->partial.append(buf, static_cast<size_t>(n));
        emit_lines(*s, prefix, false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        emit_lines(*s, prefix, true);
        ::close(s->fd);
        s->fd = -1;
      }
    }
    reap();
    if (stopping && Clock::now() >= kill_at) {
      bool any = false;
      for (Rank& k : ranks)
        if (k.running) {
          any = true;
          ::kill(-k.pid, SIGKILL);
          say("rank " + std::to_string(o.global_rank(k.slot)) + " did not stop within the grace period: sent SIGKILL");
        }
      kill_at = any ? Clock::now() + std::chrono::seconds(5) : Clock::time_point::max();
    }
  }
  for (Rank& k : ranks) {
    for (Stream* s : {&k.out, &k.err})
      if (s->fd >= 0) {
        emit_lines(*s, prefix_of(o, k), true);
        ::close(s->fd);
      }
    if (k.running) {  // only after a poll failure
      ::kill(-k.pid, SIGKILL);
      ::waitpid(k.pid, &k.status, 0);
    }
  }

  auto exit_for = [](int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 1;
  };
  if (first_failed >= 0) {
    const Rank& k = ranks[static_cast<size_t>(first_failed)];
    say("job failed: rank " + std::to_string(o.global_rank(k.slot)) + " " + describe_status(k.status));
    return exit_for(k.status);
  }
  if (interrupted_by) return 128 + interrupted_by;
  // A member that exited 0 finished training (train --elastic exits 0 only then; an
  // excluded or failed one exits non-zero): on a node other than 0 this is how the
  // launcher knows, when node 0's launcher (and the store with it) ended first.
  bool clean_exit = false;
  for (const Rank& k : ranks) clean_exit |= k.status == 0 && !k.running && k.pid > 0;
  const bool finished = elastic && (elastic->done() || clean_exit);
  if (elastic && last_elastic_failure >= 0 && !finished) {
    // Every process ended and training never finished: the survivors could not go on.
    const Rank& k = ranks[static_cast<size_t>(last_elastic_failure)];
    say("job failed: training did not finish; the last failure: " + k.id + " " + describe_status(k.status));
    return exit_for(k.status);
  }
  for (const Rank& k : ranks)
    if (failed(k.status) && !finished) return 1;
  return 0;
}
