#include "tools/launch/job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "comm/launch/env.h"
#include "comm/store/elastic_membership.h"
#include "tools/launch/cpu_binding.h"

namespace launch {

namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = ::write(g_signal_pipe[1], &b, 1);
  (void)ignored;
  errno = saved;
}

pid_t spawn(const Options& o, int slot, const std::string& id, int out_fd, int err_fd) {
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
  const std::string world = std::to_string(o.world_max()), rank = std::to_string(o.global_rank(slot)),
                    local = std::to_string(slot), local_n = std::to_string(o.nproc), port = std::to_string(o.master_port);
  ::setenv("RANK", rank.c_str(), 1);
  ::setenv("WORLD_SIZE", world.c_str(), 1);
  ::setenv("LOCAL_RANK", local.c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", local_n.c_str(), 1);
  ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
  ::setenv("MASTER_PORT", port.c_str(), 1);
  if (o.elastic) {
    // In an elastic job ranks come from the memberships; RANK/WORLD_SIZE are the start's.
    ::setenv(dpt::env::kElasticId, id.c_str(), 1);
    ::setenv(dpt::env::kElasticMin, std::to_string(o.world_min()).c_str(), 1);
    ::setenv(dpt::env::kElasticMax, std::to_string(o.world_max()).c_str(), 1);
  }
  if (!bind_this_process(o.slot_cpus.empty() ? std::vector<int>{} : o.slot_cpus[size_t(slot)])) {
    write_all(2, "launch: --bind cores: sched_setaffinity refused: " + std::string(std::strerror(errno)) + "\n");
    ::_exit(127);
  }
  std::vector<char*> args;
  for (const auto& a : o.command) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::string msg = "launch: cannot run '" + o.command[0] + "': " + std::strerror(errno) + "\n";
  write_all(2, msg);
  ::_exit(127);
}

int exit_for(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 1;
}

}  // namespace

bool route_signals() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    say(std::string("pipe: ") + std::strerror(errno));
    return false;
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGCHLD, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}

Job::Job(const Options& o, ElasticRole* elastic) : o_(o), elastic_(elastic), restarts_left_(o.max_restarts) {}

bool Job::start_ranks() {
  for (int r = 0; r < o_.nproc; ++r) {
    Rank& k = ranks_.emplace_back();
    k.slot = r;
    k.id = ElasticRole::id_for(o_.node_rank, r, 0);
    if (!start(k)) return false;
  }
  return true;
}

// Starts the process of `k` (slot, incarnation, id already set) with its two pipes.
bool Job::start(Rank& k) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    say(std::string("pipe: ") + std::strerror(errno));
    return false;
  }
  pid_t pid = spawn(o_, k.slot, k.id, out[1], err[1]);
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

std::string Job::prefix_of(const Rank& k) const {
  if (!o_.prefix) return "";
  const std::string r = std::to_string(o_.global_rank(k.slot));
  return k.incarnation == 0 ? "[rank " + r + "] " : "[rank " + r + " restart " + std::to_string(k.incarnation) + "] ";
}

bool Job::any_running() const {
  bool any = false;
  for (const Rank& k : ranks_) any |= k.running;
  return any;
}

void Job::stop_all(int sig) {
  for (Rank& k : ranks_)
    if (k.running) {
      ::kill(-k.pid, sig);
      k.killed_by_us = true;
    }
  if (!stopping_) kill_at_ = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o_.grace_s * 1000));
  stopping_ = true;
}

namespace {
// Whether the process catches SIGUSR2 (/proc/PID/status, SigCgt): a dpt program does, to
// write its flight record (comm/dispatch/flight_recorder.h); others would die of it.
bool catches_sigusr2(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGUSR2 - 1)) & 1;
  return false;
}
}  // namespace

void Job::stop_job_for(size_t r) {
  first_failed_ = static_cast<int>(r);
  int alive = 0;
  for (const Rank& x : ranks_) alive += x.running;
  if (alive > 0)
    say("stopping the other " + std::to_string(alive) + " rank(s) (SIGTERM, SIGKILL after " +
        std::to_string(o_.grace_s).substr(0, std::to_string(o_.grace_s).find('.') + 2) + " s)");
  // First every rank that keeps a flight recorder writes it (a rank blocked in a
  // collective would otherwise die with the record of what it waited on).
  int asked = 0;
  for (const Rank& x : ranks_)
    if (x.running && catches_sigusr2(x.pid)) asked += ::kill(x.pid, SIGUSR2) == 0;
  if (asked > 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop_all(SIGTERM);
}

void Job::survive(size_t r) {
  Rank& k = ranks_[r];
  elastic_->mark_dead(k.id, describe_status(k.status));
  last_elastic_failure_ = static_cast<int>(r);
  if (WIFEXITED(k.status) && WEXITSTATUS(k.status) == dpt::kExitEvicted) {
    // The group evicted it (train --straggler-action evict) and went on without it.
    say("not restarting slot " + std::to_string(k.slot) + ": " + k.id + " was evicted as a straggler (exit " +
        std::to_string(dpt::kExitEvicted) + ")");
    return;
  }
  if (restarts_left_ <= 0 || elastic_->done()) return;
  if (WIFEXITED(k.status) && WEXITSTATUS(k.status) == dpt::kExitStoreUnreachable) {
    // It waited the rendezvous timeout for the store and got nothing: node 0's launcher
    // has ended (the job is over) or this host is cut off; another start would wait in vain.
    say("not restarting slot " + std::to_string(k.slot) + ": " + k.id +
        " could not reach the rendezvous store (exit " + std::to_string(dpt::kExitStoreUnreachable) + ")");
    return;
  }
  --restarts_left_;
  Rank next;
  next.slot = k.slot;
  next.incarnation = k.incarnation + 1;
  next.id = ElasticRole::id_for(o_.node_rank, next.slot, next.incarnation);
  say("restarting slot " + std::to_string(k.slot) + " as " + next.id + " (" + std::to_string(o_.max_restarts - restarts_left_) +
      " of " + std::to_string(o_.max_restarts) + " restarts); it joins the running job");
  ranks_.push_back(std::move(next));
  if (!start(ranks_.back())) stop_job_for(ranks_.size() - 1);
}

void Job::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      Rank& k = ranks_[r];
      if (k.pid != pid || !k.running) continue;
      k.running = false;
      k.status = status;
      if (!failed(status) || (k.killed_by_us && stopping_)) continue;
      say("rank " + std::to_string(o_.global_rank(k.slot)) + (o_.elastic ? " (" + k.id + ")" : "") + " " +
          describe_status(status));
      if (first_failed_ >= 0 || interrupted_by_) continue;
      if (elastic_ && !elastic_->done()) survive(r);
      else stop_job_for(r);
    }
  }
}

void Job::supervise() {
  std::vector<pollfd> fds;
  Watched streams;
  Clock::time_point pipes_deadline = Clock::time_point::max();
  for (;;) {
    const bool running = any_running();
    watch_list(fds, streams);
    if (!running) {
      // Everyone exited; a grandchild may still hold a pipe open: do not wait on it long.
      if (streams.empty()) break;
      if (pipes_deadline == Clock::time_point::max()) pipes_deadline = Clock::now() + std::chrono::seconds(2);
      if (Clock::now() >= pipes_deadline) break;
    }
    int rc = ::poll(fds.data(), fds.size(), poll_timeout(running));
    if (rc < 0 && errno != EINTR) {
      say(std::string("poll: ") + std::strerror(errno));
      stop_all(SIGKILL);
      break;
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) forward_signals();
    if (rc > 0) forward_output(fds, streams);
    reap();
    if (stopping_ && Clock::now() >= kill_at_) kill_after_grace();
  }
}

// The signal pipe first, then every open output pipe.
void Job::watch_list(std::vector<pollfd>& fds, Watched& streams) {
  fds.clear();
  streams.clear();
  fds.push_back({g_signal_pipe[0], POLLIN, 0});
  for (Rank& k : ranks_)
    for (Stream* s : {&k.out, &k.err})
      if (s->fd >= 0) {
        fds.push_back({s->fd, POLLIN, 0});
        streams.emplace_back(s, prefix_of(k));
      }
}

int Job::poll_timeout(bool running) const {
  if (stopping_ && running) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at_ - Clock::now()).count();
    return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(ms, 1000)));
  }
  return running ? 1000 : 100;
}

void Job::forward_signals() {
  unsigned char sigs[64];
  ssize_t n = ::read(g_signal_pipe[0], sigs, sizeof sigs);
  for (ssize_t j = 0; j < n; ++j) {
    int sig = sigs[j];
    if (sig == SIGCHLD) continue;  // reaped below in any case
    if (!interrupted_by_ && first_failed_ < 0) {
      interrupted_by_ = sig;
      say("received signal " + signal_text(sig) + ", forwarding it to every rank");
    }
    stop_all(sig);
  }
}

void Job::forward_output(const std::vector<pollfd>& fds, Watched& streams) {
  for (size_t j = 1; j < fds.size(); ++j) {
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
}

void Job::kill_after_grace() {
  bool any = false;
  for (Rank& k : ranks_)
    if (k.running) {
      any = true;
      ::kill(-k.pid, SIGKILL);
      say("rank " + std::to_string(o_.global_rank(k.slot)) + " did not stop within the grace period: sent SIGKILL");
    }
  kill_at_ = any ? Clock::now() + std::chrono::seconds(5) : Clock::time_point::max();
}

void Job::finish() {
  for (Rank& k : ranks_) {
    for (Stream* s : {&k.out, &k.err})
      if (s->fd >= 0) {
        emit_lines(*s, prefix_of(k), true);
        ::close(s->fd);
      }
    if (k.running) {  // only after a poll failure
      ::kill(-k.pid, SIGKILL);
      ::waitpid(k.pid, &k.status, 0);
    }
  }
}

int Job::exit_code() {
  if (first_failed_ >= 0) {
    const Rank& k = ranks_[static_cast<size_t>(first_failed_)];
    say("job failed: rank " + std::to_string(o_.global_rank(k.slot)) + " " + describe_status(k.status));
    return exit_for(k.status);
  }
  if (interrupted_by_) return 128 + interrupted_by_;
  // A member that exited 0 finished training (train --elastic exits 0 only then; an
  // excluded or failed one exits non-zero): on a node other than 0 this is how the
  // launcher knows, when node 0's launcher (and the store with it) ended first.
  bool clean_exit = false;
  for (const Rank& k : ranks_) clean_exit |= k.status == 0 && !k.running && k.pid > 0;
  const bool finished = elastic_ && (elastic_->done() || clean_exit);
  if (elastic_ && last_elastic_failure_ >= 0 && !finished) {
    // Every process ended and training never finished: the survivors could not go on.
    const Rank& k = ranks_[static_cast<size_t>(last_elastic_failure_)];
    say("job failed: training did not finish; the last failure: " + k.id + " " + describe_status(k.status));
    return exit_for(k.status);
  }
  for (const Rank& k : ranks_)
    if (failed(k.status) && !finished) return 1;
  return 0;
}

}  // namespace launch
