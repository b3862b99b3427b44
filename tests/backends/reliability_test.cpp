// Process-level reliability tests of the tcp backend: ranks are forked processes (or the
// reliability_helper program started with hand-set launch variables), so a rank can
// really stop, die or be started wrongly. Tags select the CTest each case belongs to
// (reliability_tests.cmake): [stop] [mismatch] [rendezvous].
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/tcp/tcp_backend.h"
#include "comm/store/tcp_store.h"

#ifndef DPT_RELIABILITY_HELPER
#error "DPT_RELIABILITY_HELPER must name the helper binary"
#endif

using namespace dpt;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int free_port() {
  TcpStoreServer probe("127.0.0.1", 0);
  return probe.port();
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// Forks `world` ranks that each build a tcp communicator (timeout `op_timeout`) and run
// child(comm), whose return value is the exit code. `during(pids)` runs in the parent
// while they run; then the parent waits up to `wait_s` for every rank but `unwaited`
// (-1: none), and SIGKILLs whatever is still alive.
std::vector<int> fork_ranks(int world, Millis op_timeout, bool debug_collectives,
                            const std::function<int(Communicator&)>& child,
                            const std::function<void(const std::vector<pid_t>&)>& during, double wait_s,
                            int unwaited = -1) {
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 13;
      try {
        TcpBootstrap b{r, world, "127.0.0.1", port, nullptr, "reliability-test-token-0123456789"};
        CommOptions o;
        o.timeout = op_timeout;
        o.debug_collectives = debug_collectives;
        auto comm = create_tcp_communicator(b, o);
        code = child(*comm);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: unexpected: %s\n", r, e.what());
        code = 14;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  during(pids);
  std::vector<int> status(size_t(world), -1);
  std::vector<bool> done(size_t(world), false);
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait_s);
  for (int left = world - (unwaited >= 0); left > 0 && Clock::now() < deadline;) {
    for (int r = 0; r < world; ++r)
      if (r != unwaited && !done[r] && ::waitpid(pids[r], &status[r], WNOHANG) == pids[r]) done[r] = true, --left;
    std::this_thread::sleep_for(10ms);
  }
  for (int r = 0; r < world; ++r) {
    if (done[r]) continue;
    ::kill(pids[r], SIGCONT);
    ::kill(pids[r], SIGKILL);
    ::waitpid(pids[r], &status[r], 0);
  }
  return status;
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// A helper process started with extra environment variables; output goes to a file.
struct Proc {
  pid_t pid = -1;
  std::string out_path;
  int status = -1;
  double seconds = 0;
  std::string output;
};

Proc spawn_helper(const std::map<std::string, std::string>& env, const std::vector<std::string>& args) {
  static int counter = 0;
  Proc p;
  p.out_path = "reliability_helper." + std::to_string(::getpid()) + "." + std::to_string(counter++) + ".log";
  p.pid = ::fork();
  if (p.pid == 0) {
    int fd = ::open(p.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
      ::unsetenv(v);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<std::string> all = {DPT_RELIABILITY_HELPER, "--backend", "tcp"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return p;
}

// Waits for every process (killing those past `limit_s`), reads their output.
void finish(std::vector<Proc>& procs, double limit_s) {
  const auto t0 = Clock::now();
  for (auto& p : procs) {
    while (::waitpid(p.pid, &p.status, WNOHANG) == 0) {
      if (seconds_since(t0) > limit_s) {
        ::kill(p.pid, SIGKILL);
        ::waitpid(p.pid, &p.status, 0);
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    p.seconds = seconds_since(t0);
    std::ifstream f(p.out_path);
    std::stringstream ss;
    ss << f.rdbuf();
    p.output = ss.str();
    std::remove(p.out_path.c_str());
  }
}

Proc run_one(const std::map<std::string, std::string>& env, double limit_s = 10) {
  std::vector<Proc> v{spawn_helper(env, {"--iters", "1"})};
  finish(v, limit_s);
  return v[0];
}

}  // namespace

// ---------------------------------------------------------------------------------
// [stop] A SIGSTOP'd rank: nothing tells the others it is gone (its sockets stay open),
// so only the timeout can catch it, and the error must name it. Each survivor names the
// peer it was waiting for: in a ring or tree a rank may be waiting for a rank that is
// itself waiting for the stopped one, so the check follows that chain, as a user reading
// the errors would, and requires it to end at the stopped rank. With 2 ranks (and for the
// stopped rank's direct neighbours) the error names the stopped rank itself.

TEST_CASE("a SIGSTOPped rank makes the others fail with a TimeoutError naming it", "[stop]") {
  const int world = GENERATE(2, 3);
  const int victim = world - 1;
  const Millis timeout = 2000ms;
  const double allowed_s = 2.0 + 1.5;  // COMM_TIMEOUT (as CommOptions) + slack for a loaded machine
  auto status = fork_ranks(
      world, timeout, false,
      [&](Communicator& c) {
        std::vector<float> v(1 << 14, 1.0f);
        for (long i = 0;; ++i) {
          auto t0 = Clock::now();
          try {
            c.allreduce(make_buffer(v.data(), v.size()), ReduceOp::sum);
            std::fill(v.begin(), v.end(), 1.0f);
          } catch (const CommError& e) {
            const double s = seconds_since(t0);
            std::printf("rank %d: failed after %.2f s: %s\n", c.rank(), s, e.what());
            // A rank behind the stuck chain may instead hear that its peer gave up
            // (PeerError): that is the failure spreading, and it names that peer.
            const bool timeout_error = dynamic_cast<const TimeoutError*>(&e) != nullptr;
            if (!timeout_error && !dynamic_cast<const PeerError*>(&e)) return 11;
            if (s > allowed_s) return 15;
            if (e.context().peer < 0) return 12;
            return (timeout_error ? 100 : 150) + e.context().peer;
          }
          if (i > 2000000) return 10;
        }
      },
      [&](const std::vector<pid_t>& pids) {
        std::this_thread::sleep_for(1500ms);  // rendezvous done, allreduces under way
        ::kill(pids[victim], SIGSTOP);
      },
      20.0, victim);
  std::vector<int> named(size_t(world), -1);
  std::vector<bool> timed_out(size_t(world), false);
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    const int code = exit_code(status[r]);
    INFO("world " << world << " rank " << r << " exit " << code
                  << " (100+p TimeoutError naming peer p, 150+p PeerError naming p; 10 no error, 11 other error, "
                     "12 no peer, 15 too slow)");
    REQUIRE(code >= 100);
    named[r] = (code - 100) % 50;
    timed_out[r] = code < 150;
  }
  int direct = 0;
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    int at = r, hops = 0;
    while (at != victim && hops++ < world) at = named[at];
    INFO("world " << world << ": rank " << r << " named rank " << named[r]);
    CHECK(at == victim);
    direct += named[r] == victim && timed_out[r];
  }
  CHECK(direct >= 1);
  if (world == 2) CHECK((named[0] == victim && timed_out[0]));
}

// ---------------------------------------------------------------------------------
// [mismatch] COMM_DEBUG_COLLECTIVES: ranks compare fingerprints before each collective.

TEST_CASE("with debug collectives, different allreduce counts fail on every rank showing both", "[mismatch]") {
  auto status = fork_ranks(
      3, 10000ms, true,
      [](Communicator& c) {
        std::vector<float> v(1024 + (c.rank() == 2 ? 1 : 0), 1.0f);
        c.allreduce(make_buffer(v.data(), 1024), ReduceOp::sum);  // agree first: #0 passes
        try {
          c.allreduce(make_buffer(v.data(), v.size()), ReduceOp::sum);
          return 10;
        } catch (const MismatchError& e) {
          std::fprintf(stderr, "rank %d: %s\n", c.rank(), e.what());
          const std::string w = e.what();
          const bool both = contains(w, "rank 0 issued allreduce(f32, count 1024, op sum) #1") &&
                            contains(w, "rank 2 issued allreduce(f32, count 1025, op sum) #1");
          return both ? 0 : 11;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d: wrong error: %s\n", c.rank(), e.what());
          return 12;
        }
      },
      [](const std::vector<pid_t>&) {}, 30.0);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << " exit " << exit_code(status[r]) << " (0 ok, 10 no error, 11 text, 12 other error)");
    CHECK(exit_code(status[r]) == 0);
  }
}

TEST_CASE("with debug collectives, a broadcast against an allreduce is a mismatch; without, none is checked",
          "[mismatch]") {
  auto status = fork_ranks(
      2, 10000ms, true,
      [](Communicator& c) {
        std::vector<float> v(256, 1.0f);
        try {
          if (c.rank() == 0) c.broadcast(make_buffer(v.data(), v.size()), 0);
          else c.allreduce(make_buffer(v.data(), v.size()), ReduceOp::max);
          return 10;
        } catch (const MismatchError& e) {
          std::fprintf(stderr, "rank %d: %s\n", c.rank(), e.what());
          const std::string w = e.what();
          return contains(w, "broadcast(f32, count 256, root 0) #0") && contains(w, "allreduce(f32, count 256, op max) #0")
                     ? 0
                     : 11;
        }
      },
      [](const std::vector<pid_t>&) {}, 30.0);
  CHECK(exit_code(status[0]) == 0);
  CHECK(exit_code(status[1]) == 0);
}

TEST_CASE("cost of debug collectives on 4 KiB allreduces (printed)", "[mismatch]") {
  const char* path = "reliability_fingerprint_cost.txt";
  std::remove(path);
  for (bool on : {false, true}) {
    auto status = fork_ranks(
        2, 10000ms, on,
        [&](Communicator& c) {
          std::vector<float> v(1024);
          auto run = [&](int n) {
            for (int i = 0; i < n; ++i) {
              std::fill(v.begin(), v.end(), 1.0f);
              c.allreduce(make_buffer(v.data(), v.size()), ReduceOp::sum);
              if (v[0] != 2.0f) return false;
            }
            return true;
          };
          if (!run(200)) return 4;  // warm-up
          c.barrier();
          auto t0 = Clock::now();
          const int n = 2000;
          if (!run(n)) return 4;
          const double us = seconds_since(t0) * 1e6 / n;
          if (c.rank() == 0) {
            std::ofstream f(path, std::ios::app);
            f << (on ? "on " : "off ") << us << "\n";
          }
          return 0;
        },
        [](const std::vector<pid_t>&) {}, 60.0);
    CHECK(exit_code(status[0]) == 0);
    CHECK(exit_code(status[1]) == 0);
  }
  std::ifstream f(path);
  std::string k1, k2;
  double off = 0, on = 0;
  f >> k1 >> off >> k2 >> on;
  REQUIRE(k1 == "off");
  REQUIRE(k2 == "on");
  std::printf("debug collectives cost (2 ranks, tcp, 4 KiB f32 allreduce, 2000 ops): off %.1f us/op, on %.1f us/op "
              "(+%.1f us, x%.2f)\n",
              off, on, on - off, on / off);
  std::remove(path);
}

// ---------------------------------------------------------------------------------
// [rendezvous] Launch variables set by hand, as a user of a custom launcher would.

TEST_CASE("rendezvous: a rank that never arrives is reported as k of N joined, missing ranks", "[rendezvous]") {
  const std::string port = std::to_string(free_port());
  std::vector<Proc> procs;
  for (int r : {0, 2})
    procs.push_back(spawn_helper({{"RANK", std::to_string(r)}, {"WORLD_SIZE", "3"}, {"MASTER_PORT", port},
                                  {"COMM_RENDEZVOUS_TIMEOUT_S", "2"}},
                                 {"--iters", "1"}));
  finish(procs, 20);
  for (const auto& p : procs) {
    INFO(p.output << "(after " << p.seconds << " s)");
    CHECK(exit_code(p.status) == 3);
    CHECK(contains(p.output, "2 of 3 ranks joined within 2 s, missing ranks [1]"));
    CHECK(p.seconds < 8);
  }
}

TEST_CASE("rendezvous: two processes with the same RANK fail at once, long before the timeout", "[rendezvous]") {
  const std::string port = std::to_string(free_port());
  std::vector<Proc> procs;
  for (int r : {0, 1, 1})
    procs.push_back(spawn_helper({{"RANK", std::to_string(r)}, {"WORLD_SIZE", "3"}, {"MASTER_PORT", port},
                                  {"COMM_RENDEZVOUS_TIMEOUT_S", "30"}},
                                 {"--iters", "1"}));
  finish(procs, 25);
  // Rank 0 serves the store and leaves as soon as it sees the duplicate; a rank that
  // had not looked yet then learns that the store is gone instead. Either way: at once.
  int told = 0;
  for (const auto& p : procs) {
    INFO(p.output << "(after " << p.seconds << " s)");
    CHECK(exit_code(p.status) == 3);
    told += contains(p.output, "rank 1 was claimed by two processes (two processes started with the same RANK?)");
    CHECK((contains(p.output, "claimed by two processes") || contains(p.output, "did rank 0, which serves the store, exit?")));
    CHECK(p.seconds < 5);
  }
  CHECK(told >= 2);
}

TEST_CASE("rendezvous: malformed launch variables give a clear error at once", "[rendezvous]") {
  struct Case {
    std::map<std::string, std::string> env;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "launch variable RANK='x' is not an integer in [0, 1]"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "launch variable RANK='2' is not an integer in [0, 1]"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "launch variable WORLD_SIZE='0' is not an integer"},
      {{{"WORLD_SIZE", "2"}}, "RANK is missing while WORLD_SIZE is set"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "99999"}}, "MASTER_PORT='99999' is not an integer"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}, {"COMM_JOB_TOKEN", "short"}},
       "COMM_JOB_TOKEN is 5 characters long; use at least 16"},
  };
  for (const auto& c : cases) {
    Proc p = run_one(c.env);
    INFO(p.output << "(after " << p.seconds << " s)");
    CHECK(exit_code(p.status) == 3);
    CHECK(contains(p.output, c.expect));
    CHECK(p.seconds < 2);
  }
}
