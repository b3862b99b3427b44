// tools/launch driven over launch_test_helper: environment, output prefixing, a failing
// rank stopping the job (named, with how it died), and no process left behind.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

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
