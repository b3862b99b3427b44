// Process-level faults of the tcp backend: ranks are forked processes (not threads), so
// a rank can really die. Survivors must fail with PeerError naming the dead rank within
// 2 s, not at the timeout. Each child reports through its exit code:
//   0 = failed as expected, in time; 10 = no error; 11 = wrong error; 12 = too slow.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/tcp/tcp_backend.h"
#include "comm/store/tcp_store.h"

using namespace dpt;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// The child's exit code, or 128 + the signal that killed it: a child killed by a signal
// (or by the deadline below) must never read as "exited 0".
int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Runs child(comm) in `world` forked processes; returns their wait statuses. The child
// owns the communicator (it may destroy it before it returns).
using OwnedComm = std::unique_ptr<Communicator>;
std::vector<int> fork_ranks_owning(int world, const std::function<int(OwnedComm&)>& child) {
  int port = 0;
  {
    TcpStoreServer probe("127.0.0.1", 0);
    port = probe.port();
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 13;
      try {
        TcpBootstrap b{r, world, "127.0.0.1", port, nullptr, ""};
        CommOptions o;
        o.timeout = Millis(30000);
        auto comm = create_tcp_communicator(b, o);
        code = child(comm);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: unexpected: %s\n", r, e.what());
        code = 14;
      }
      std::fflush(stderr);
      ::_exit(code);  // no Catch teardown in the child
    }
    pids.push_back(pid);
  }
  std::vector<int> status(static_cast<size_t>(world));
  auto deadline = Clock::now() + 60s;
  for (int r = 0; r < world; ++r) {
    while (::waitpid(pids[r], &status[r], WNOHANG) == 0) {
      if (Clock::now() > deadline) ::kill(pids[r], SIGKILL);
      std::this_thread::sleep_for(10ms);
    }
  }
  return status;
}

std::vector<int> fork_ranks(int world, const std::function<int(Communicator&)>& child) {
  return fork_ranks_owning(world, [&](OwnedComm& c) { return child(*c); });
}

// Ranks 0 and 2 run an allreduce that rank 1 never joins (it has done `leave` and sleeps,
// alive); each must fail within 2 s with an error holding `needle`. The ranks share one
// host and no connection (the allreduce runs in the shared-memory arena): only the
// arena's state words can tell them (shm_arena.h, "state").
void check_arena_wait_ends(const std::function<void(OwnedComm&)>& leave, const std::string& needle) {
  auto status = fork_ranks_owning(3, [&](OwnedComm& c) {
    c->barrier();
    if (c->rank() == 1) {
      leave(c);
      std::this_thread::sleep_for(6s);  // alive all along: no process death to notice
      return 0;
    }
    std::vector<float> v(1024, 1.0f);
    const auto t0 = Clock::now();
    try {
      c->allreduce(make_buffer(v.data(), v.size()), ReduceOp::sum);
      return 10;
    } catch (const CommError& e) {
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      std::fprintf(stderr, "rank %d failed after %.3f s: %s\n", c->rank(), s, e.what());
      if (std::string(e.what()).find(needle) == std::string::npos) return 11;
      return s < 2.0 ? 0 : 12;
    }
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << " status " << status[r]);
    CHECK(exit_code(status[r]) == 0);
  }
}

}  // namespace

TEST_CASE("fault: a rank killed mid-collective makes every other rank fail within 2 s naming it") {
  constexpr int kWorld = 4, kVictim = 2;
  auto status = fork_ranks(kWorld, [](Communicator& c) {
    std::vector<float> v(1 << 18, 1.0f);
    for (int i = 0;; ++i) {
      if (c.rank() == kVictim && i == 5) ::raise(SIGKILL);
      auto t0 = Clock::now();
      try {
        c.allreduce(make_buffer(v.data(), v.size()), ReduceOp::sum);
      } catch (const CommError& e) {
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        std::fprintf(stderr, "rank %d failed after %.3f s: %s\n", c.rank(), s, e.what());
        if (std::string(e.what()).find("rank 2") == std::string::npos) return 11;
        return s < 2.0 ? 0 : 12;
      }
      if (i > 1000) return 10;
    }
  });
  CHECK(WIFSIGNALED(status[kVictim]));
  for (int r = 0; r < kWorld; ++r) {
    if (r == kVictim) continue;
    INFO("rank " << r << " status " << status[r]);
    CHECK(exit_code(status[r]) == 0);
  }
}

TEST_CASE("fault: a rank exiting without destroying its communicator is reported as a crash") {
  auto status = fork_ranks(2, [](Communicator& c) {
    // One message first: the pair connects on demand, and the end of that connection is
    // what rank 0 must read as a crash.
    int32_t hello = 7;
    if (c.rank() == 0) c.send(make_buffer(&hello, 1), 1, 2);
    else c.recv(make_buffer(&hello, 1), 0, 2);
    if (c.rank() == 1) ::_exit(0);  // no goodbye
    int32_t x;
    try {
      c.recv(make_buffer(&x, 1), 1, 3);
      return 10;
    } catch (const PeerError& e) {
      return std::string(e.what()).find("connection closed by peer rank 1: did it exit or crash?") != std::string::npos ? 0 : 11;
    }
  });
  CHECK(exit_code(status[0]) == 0);
  CHECK(exit_code(status[1]) == 0);
}

TEST_CASE("fault: a rank that aborts ends the other ranks' shared-memory waits on it within 2 s", "[arena]") {
  check_arena_wait_ends([](OwnedComm& c) { c->abort("the test gives up"); },
                        "rank 1 gave up (its communicator failed or was aborted)");
}

TEST_CASE("fault: a rank that shuts its communicator down ends the others' shared-memory waits within 2 s", "[arena]") {
  check_arena_wait_ends([](OwnedComm& c) { c.reset(); }, "rank 1 shut down its communicator while this rank waited");
}
