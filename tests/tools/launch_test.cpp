// tools/launch driven over launch_test_helper: environment, output prefixing, a failing
// rank stopping the job (named, with how it died), and no process left behind.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
  double seconds = 0;
};

Result run(const std::string& args) {
  std::string cmd = std::string(DPT_LAUNCH_BIN) + " " + args + " 2>&1";
  auto t0 = Clock::now();
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  Result r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/launch_test.XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// Every pid recorded under dir must be gone (launch reaped and exited).
void check_no_survivors(const fs::path& dir, int expected_files) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    pid_t pid = 0;
    std::ifstream(e.path()) >> pid;
    REQUIRE(pid > 0);
    INFO("pid " << pid << " from " << e.path());
    CHECK((::kill(pid, 0) == -1 && errno == ESRCH));
  }
  CHECK(files == expected_files);
}

}  // namespace

TEST_CASE("launch sets the torchrun-style variables") {
  Result r = run("-n 2 --master-port 29999 " DPT_LAUNCH_HELPER " env");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "[rank 1] RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999"));
  CHECK(contains(r.output, "[rank 0] RANK=0 WORLD_SIZE=2"));
}

TEST_CASE("launch prefixes whole lines of stdout and stderr with the rank") {
  Result r = run("-n 3 " DPT_LAUNCH_HELPER " print");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  for (int k = 0; k < 3; ++k) {
    std::string rk = "[rank " + std::to_string(k) + "] ";
    CHECK(contains(r.output, rk + "hello from rank " + std::to_string(k) + "\n"));
    CHECK(contains(r.output, rk + "second line " + std::to_string(k) + "\n"));  // written in two pieces
    CHECK(contains(r.output, rk + "err " + std::to_string(k) + "\n"));
  }
}

TEST_CASE("launch: a rank exiting non-zero stops the job, is named, and nothing is left") {
  TempDir dir;
  Result r = run("-n 3 --grace-s 2 " DPT_LAUNCH_HELPER " fail 1 3 " + dir.path.string());
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "rank 1 exited with code 3"));
  CHECK(contains(r.output, "[rank 1] rank 1 failing now"));
  CHECK(r.seconds < 10);
  check_no_survivors(dir.path, 2);
}

TEST_CASE("launch: a rank killed by a signal is reported with the signal's name") {
  TempDir dir;
  Result r = run("-n 3 " DPT_LAUNCH_HELPER " selfkill 2 " + dir.path.string());
  INFO(r.output);
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(contains(r.output, "rank 2 killed by signal 9 (SIGKILL)"));
  check_no_survivors(dir.path, 2);
}

TEST_CASE("launch: ranks ignoring SIGTERM get SIGKILL after the grace period") {
  TempDir dir;
  Result r = run("-n 2 --grace-s 0.5 " DPT_LAUNCH_HELPER " stubborn " + dir.path.string());
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output, "rank 0 exited with code 1"));
  CHECK(contains(r.output, "sent SIGKILL"));
  CHECK(r.seconds < 10);
  check_no_survivors(dir.path, 2);
}

TEST_CASE("launch: a program that does not exist fails clearly") {
  Result r = run("-n 2 /nonexistent/program");
  INFO(r.output);
  CHECK(r.exit_code == 127);
  CHECK(contains(r.output, "cannot run '/nonexistent/program'"));
}

TEST_CASE("launch: bad flags are usage errors") {
  CHECK(run("").exit_code == 2);
  CHECK(run("-n 0 true").exit_code == 2);
  CHECK(run("-n abc true").exit_code == 2);
  CHECK(run("--bogus -n 2 true").exit_code == 2);
  Result r = run("--print-env");
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "COMM_TIMEOUT_S"));
}

// The race fixed in f5a74ff, forced: node 1's launcher had a member fail (so it must know
// whether training finished), node 0's member wrote elastic/done only after that, and
// node 0's launcher, serving the store, exits before node 1's last member does, so node
// 1's launcher can no longer ask the store. Its member that exited 0 tells it that
// training finished (and done, once seen, is remembered): the job succeeds on both
// nodes. Before the fix node 1 reported "training did not finish" and exited 1.
TEST_CASE("launch --elastic: node 1 knows training finished after node 0's launcher and store are gone") {
  // A free port for node 0's store (bound and released: the launch binds it next).
  int port = 0;
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    ::close(fd);
  }
  ::setenv("COMM_JOB_TOKEN", "launch-test-elastic-race-token", 1);
  const std::string common = "--elastic -n 2 --nnodes 2 --master-addr 127.0.0.1 --master-port " + std::to_string(port);
  const std::string prog = std::string(" " DPT_LAUNCH_HELPER " elastic-race 2>&1");
  FILE* node0 = ::popen((std::string(DPT_LAUNCH_BIN) + " " + common + " --node-rank 0" + prog).c_str(), "r");
  REQUIRE(node0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // node 0 serves the store first
  Result node1 = run(common + " --node-rank 1" + prog);
  std::string out0;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, node0)) > 0) out0.append(buf, n);
  const int st0 = ::pclose(node0);
  ::unsetenv("COMM_JOB_TOKEN");
  INFO("node 0:\n" << out0 << "node 1:\n" << node1.output);
  CHECK((WIFEXITED(st0) && WEXITSTATUS(st0) == 0));
  CHECK(contains(out0, "rank 0 wrote elastic/done"));
  // The ordering was forced as intended: node 1's member saw the store gone first.
  REQUIRE(contains(node1.output, "rank 2: the store is gone, exiting 0"));
  CHECK_FALSE(contains(node1.output, "training did not finish"));
  CHECK(node1.exit_code == 0);
}
