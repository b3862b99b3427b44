// launch: start N local ranks of a program, torchrun-style, with no MPI.
//
//   build/bin/launch -n 4 [--master-port P] [--grace-s S] prog args...
//
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
// (a free port unless given), and COMM_JOB_TOKEN: the caller's, or a fresh random secret
// when unset, so the job's connections are authenticated (comm/job_token.h). Every line a rank prints is prefixed "[rank r] " (stdout
// to stdout, stderr to stderr, whole lines only, so ranks never interleave mid-line).
// When a rank fails (non-zero exit or a signal) the others get SIGTERM, then SIGKILL
// after the grace period; launch says which rank died and how, and exits non-zero:
// with the failed rank's exit code, or 128+signal. SIGINT/SIGTERM sent to launch are
// forwarded to every rank. Exit code 0 only if every rank exits 0.
//
// Terms: a rank's "group" is its process group (setpgid), so the kill also reaches
// anything the rank started itself.
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
#include <string>
#include <vector>

#include "comm/env.h"
#include "comm/store/job_token.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int nproc = 0;
  int master_port = 0;
  std::string master_addr = "127.0.0.1";
  double grace_s = 5.0;
  bool prefix = true;
  std::vector<std::string> command;
};

struct Stream {
  int fd = -1;      // read end of the rank's pipe; -1 once at EOF
  int out_fd = 1;   // where its lines go
  std::string partial;
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  bool killed_by_us = false;
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

void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // our own stdout is gone: nothing sensible to do
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void say(const std::string& s) { write_all(2, "launch: " + s + "\n"); }

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + signal_text(WTERMSIG(status));
  return "ended with status " + std::to_string(status);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

void usage(FILE* f) {
  std::fprintf(f,
               "usage: launch -n N [--master-addr A] [--master-port P] [--grace-s S] [--no-prefix] prog [args...]\n"
               "       launch --print-env\n"
               "Starts N local ranks of prog with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
               "MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default: a free port) set.\n"
               "If a rank fails the others are stopped (SIGTERM, then SIGKILL after --grace-s,\n"
               "default 5) and launch exits non-zero. --print-env prints the COMM_* variables.\n");
}

void print_env_table() {
  std::printf("| Variable | Default | Meaning |\n|---|---|---|\n");
  for (const auto& k : dpt::env::knobs())
    std::printf("| `%s` | %s | %s |\n", k.name, *k.default_value ? k.default_value : "(unset)", k.meaning);
}

// Returns false (after printing why) when the arguments are wrong.
bool parse(int argc, char** argv, Options& o, int& exit_code) {
  auto number = [&](const std::string& flag, const char* v, double lo, double hi, double& out) {
    char* end = nullptr;
    errno = 0;
    double x = v ? std::strtod(v, &end) : 0;
    if (!v || *end || errno || x < lo || x > hi) {
      say(flag + " needs a number in [" + std::to_string(static_cast<long>(lo)) + ", " +
          std::to_string(static_cast<long>(hi)) + "], got '" + (v ? v : "") + "'");
      return false;
    }
    out = x;
    return true;
  };
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a.empty() || a[0] != '-') break;
    if (a == "--") {
      ++i;
      break;
    }
    std::string value;
    bool has_inline = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_inline = true;
    }
    auto next = [&]() -> const char* {
      if (has_inline) return value.c_str();
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    double x = 0;
    if (a == "-h" || a == "--help") {
      usage(stdout);
      exit_code = 0;
      return false;
    } else if (a == "--print-env") {
      print_env_table();
      exit_code = 0;
      return false;
    } else if (a == "-n" || a == "--nproc" || a == "--nproc-per-node" || a == "-np") {
      if (!number(a, next(), 1, 4096, x)) return false;
      o.nproc = static_cast<int>(x);
    } else if (a == "--master-port") {
      if (!number(a, next(), 1, 65535, x)) return false;
      o.master_port = static_cast<int>(x);
    } else if (a == "--master-addr") {
      const char* v = next();
      if (!v || !*v) {
        say("--master-addr needs an address");
        return false;
      }
      o.master_addr = v;
    } else if (a == "--grace-s") {
      if (!number(a, next(), 0, 3600, o.grace_s)) return false;
    } else if (a == "--no-prefix") {
      o.prefix = false;
    } else {
      say("unknown option '" + a + "'");
      usage(stderr);
      return false;
    }
  }
  for (; i < argc; ++i) o.command.push_back(argv[i]);
  if (o.nproc <= 0 || o.command.empty()) {
    say(o.nproc <= 0 ? "-n N is required" : "no program given");
    usage(stderr);
    return false;
  }
  return true;
}

pid_t spawn(const Options& o, int rank, int out_fd, int err_fd) {
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
  std::string n = std::to_string(o.nproc), r = std::to_string(rank), port = std::to_string(o.master_port);
  ::setenv("RANK", r.c_str(), 1);
  ::setenv("WORLD_SIZE", n.c_str(), 1);
  ::setenv("LOCAL_RANK", r.c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
  ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
  ::setenv("MASTER_PORT", port.c_str(), 1);
  std::vector<char*> args;
  for (const auto& a : o.command) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::string msg = "launch: cannot run '" + o.command[0] + "': " + std::strerror(errno) + "\n";
  write_all(2, msg);
  ::_exit(127);
}

// Emits the complete lines in `s.partial`, each prefixed; keeps the unfinished tail.
void emit_lines(Stream& s, const std::string& prefix, bool flush_all) {
  size_t start = 0;
  std::string out;
  for (;;) {
    size_t nl = s.partial.find('\n', start);
    if (nl == std::string::npos) break;
    out += prefix;
    out.append(s.partial, start, nl - start + 1);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  // A very long line without a newline is emitted in pieces rather than held forever.
  if (!s.partial.empty() && (flush_all || s.partial.size() > (1u << 20))) {
    out += prefix + s.partial + "\n";
    s.partial.clear();
  }
  if (!out.empty()) write_all(s.out_fd, out);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int exit_code = 2;
  if (!parse(argc, argv, o, exit_code)) return exit_code;
  try {
    // Set in our own environment before any fork, so every rank inherits the same one.
    if (dpt::job_token_from_env().empty())
      ::setenv(dpt::env::kJobToken, dpt::generate_job_token().c_str(), 1);
  } catch (const std::exception& e) {
    say(e.what());
    return 2;
  }
  if (o.master_port == 0) o.master_port = free_port();
  if (o.master_port == 0) {
    say("could not find a free port on 127.0.0.1; pass --master-port");
    return 2;
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

  std::vector<Rank> ranks(static_cast<size_t>(o.nproc));
  for (int r = 0; r < o.nproc; ++r) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      say(std::string("pipe: ") + std::strerror(errno));
      return 2;
    }
    pid_t pid = spawn(o, r, out[1], err[1]);
    ::close(out[1]);
    ::close(err[1]);
    if (pid < 0) {
      say(std::string("fork: ") + std::strerror(errno));
      return 2;
    }
    ::setpgid(pid, pid);  // also here: whichever runs first wins the race
    Rank& k = ranks[static_cast<size_t>(r)];
    k.pid = pid;
    k.running = true;
    k.out = Stream{out[0], 1, {}};
    k.err = Stream{err[0], 2, {}};
  }

  int first_failed = -1;        // rank whose failure stopped the job
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
  auto reap = [&] {
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (size_t r = 0; r < ranks.size(); ++r) {
        Rank& k = ranks[r];
        if (k.pid != pid) continue;
        k.running = false;
        k.status = status;
        if (failed(status) && !(k.killed_by_us && stopping)) {
          say("rank " + std::to_string(r) + " " + describe_status(status));
          if (first_failed < 0 && !interrupted_by) {
            first_failed = static_cast<int>(r);
            int alive = 0;
            for (const Rank& x : ranks) alive += x.running;
            if (alive > 0)
              say("stopping the other " + std::to_string(alive) + " rank(s) (SIGTERM, SIGKILL after " +
                  std::to_string(o.grace_s).substr(0, std::to_string(o.grace_s).find('.') + 2) + " s)");
            stop_all(SIGTERM);
          }
        }
      }
    }
  };

  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  std::vector<std::string> prefixes;
  for (int r = 0; r < o.nproc; ++r) prefixes.push_back(o.prefix ? "[rank " + std::to_string(r) + "] " : "");
  Clock::time_point pipes_deadline = Clock::time_point::max();
  for (;;) {
    bool any_running = false;
    for (const Rank& k : ranks) any_running |= k.running;
    fds.clear();
    streams.clear();
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    for (size_t r = 0; r < ranks.size(); ++r)
      for (Stream* s : {&ranks[r].out, &ranks[r].err})
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
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
      Stream* s = streams[j - 1];
      size_t r = 0;
      for (; r < ranks.size(); ++r)
        if (s == &ranks[r].out || s == &ranks[r].err) break;
      char buf[65536];
      ssize_t n = ::read(s->fd, buf, sizeof buf);
      if (n > 0) {
        s->partial.append(buf, static_cast<size_t>(n));
        emit_lines(*s, prefixes[r], false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        emit_lines(*s, prefixes[r], true);
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
          say("rank " + std::to_string(&k - ranks.data()) + " did not stop within the grace period: sent SIGKILL");
        }
      kill_at = any ? Clock::now() + std::chrono::seconds(5) : Clock::time_point::max();
    }
  }
  for (Rank& k : ranks) {
    for (Stream* s : {&k.out, &k.err})
      if (s->fd >= 0) {
        emit_lines(*s, prefixes[static_cast<size_t>(&k - ranks.data())], true);
        ::close(s->fd);
      }
    if (k.running) {  // only after a poll failure
      ::kill(-k.pid, SIGKILL);
      ::waitpid(k.pid, &k.status, 0);
    }
  }

  if (first_failed >= 0) {
    int st = ranks[static_cast<size_t>(first_failed)].status;
    say("job failed: rank " + std::to_string(first_failed) + " " + describe_status(st));
    if (WIFEXITED(st)) return WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 1;
  }
  if (interrupted_by) return 128 + interrupted_by;
  for (const Rank& k : ranks)
    if (failed(k.status)) return 1;
  return 0;
}
