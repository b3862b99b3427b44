#pragma once
// This node's ranks of one job: started with their environment, their output forwarded
// line by line, signals passed on, the others stopped when one fails (or, elastic, the
// failure survived and the slot refilled), and the launcher's exit code at the end.
//
// Terms:
//   group     a rank's process group (setpgid), so a kill also reaches anything the
//             rank started itself.
//   stopping  the job is ending: the ranks got SIGTERM (or the forwarded signal) and
//             get SIGKILL once the grace period (--grace-s) is over.
//   first failure  the rank whose failure stopped the job: its exit code is launch's.
#include <sys/types.h>

#include <chrono>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "tools/launch/elastic_role.h"
#include "tools/launch/options.h"
#include "tools/launch/process_io.h"

struct pollfd;

namespace launch {

// Routes SIGCHLD, SIGINT and SIGTERM to Job::supervise through a pipe (the handler only
// writes the signal number) and ignores SIGPIPE; false, having said why, if it cannot.
bool route_signals();

class Job {
 public:
  // `elastic` (may be null) outlives the job.
  Job(const Options& o, ElasticRole* elastic);
  // Starts every slot; false (having said why) when one cannot be started.
  bool start_ranks();
  // Until every rank has ended and its output is forwarded (or poll fails).
  void supervise();
  // Forwards what is left of the output; kills and reaps a rank still running (only
  // after a poll failure).
  void finish();
  // 0 only if every rank exited 0 (elastic: training finished); else the first
  // failure's exit code or 128+signal.
  int exit_code();

 private:
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
  using Watched = std::vector<std::pair<Stream*, std::string>>;  // with the owner's prefix

  bool start(Rank& k);
  std::string prefix_of(const Rank& k) const;
  bool any_running() const;
  void stop_all(int sig);
  void stop_job_for(size_t r);
  void survive(size_t r);  // elastic: a failure before training finished
  void reap();
  void watch_list(std::vector<pollfd>& fds, Watched& streams);
  int poll_timeout(bool running) const;
  void forward_signals();
  void forward_output(const std::vector<pollfd>& fds, Watched& streams);
  void kill_after_grace();

  const Options& o_;
  ElasticRole* elastic_;
  std::deque<Rank> ranks_;      // a deque: restarts append without moving the others
  int first_failed_ = -1;       // index in ranks_ of the failure that stopped the job
  int last_elastic_failure_ = -1;  // elastic: the latest failure the job went on without
  int restarts_left_;
  int interrupted_by_ = 0;      // signal that stopped the job
  bool stopping_ = false;
  Clock::time_point kill_at_{};
};

}  // namespace launch
