#include "comm/store/munge_secret.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

extern char** environ;

namespace dpt {
namespace {

bool on_path(const std::string& cmd) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string dirs(path);
  size_t at = 0;
  while (at <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', at), dirs.size());
    const std::string full = dirs.substr(at, end - at) + "/" + cmd;
    if (::access(full.c_str(), X_OK) == 0) return true;
    at = end + 1;
  }
  return false;
}

// COMM_MUNGE_SOCKET, else AuthInfo=...socket=PATH... of slurm.conf, else "".
std::string munge_socket() {
  if (const char* s = std::getenv("COMM_MUNGE_SOCKET"); s && *s) return s;
  const char* conf = std::getenv("SLURM_CONF");
  std::ifstream in(conf && *conf ? conf : "/etc/slurm/slurm.conf");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("AuthInfo=", 0) != 0) continue;
    const size_t at = line.find("socket=");
    if (at == std::string::npos) return "";
    const size_t end = line.find_first_of(", \t", at);
    return line.substr(at + 7, end == std::string::npos ? std::string::npos : end - at - 7);
  }
  return "";
}

// Runs `argv` with `input` on its stdin; returns its stdout, or throws with its stderr.
std::string run_filter(std::vector<std::string> argv, const std::string& input) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC))
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    throw std::runtime_error(argv[0] + ": " + std::strerror(rc));
  }
  // The payload is small (a token, a credential): it fits the pipe, so write, then read.
  size_t off = 0;
  while (off < input.size()) {
    const ssize_t w = ::write(in[1], input.data() + off, input.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += size_t(w);
  }
  ::close(in[1]);
  std::string stdout_text, stderr_text;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds, 2, 10000) <= 0) break;  // munge answers in milliseconds
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      char buf[4096];
      const ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        (i == 0 ? stdout_text : stderr_text).append(buf, size_t(r));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!stderr_text.empty() && (stderr_text.back() == '\n' || stderr_text.back() == ' ')) stderr_text.pop_back();
    throw std::runtime_error(argv[0] + " failed: " + (stderr_text.empty() ? "no message" : stderr_text));
  }
  return stdout_text;
}

std::vector<std::string> with_socket(std::vector<std::string> argv) {
  if (const std::string s = munge_socket(); !s.empty()) argv.push_back("--socket=" + s);
  return argv;
}

}  // namespace

bool munge_usable() {
  const char* job = std::getenv("SLURM_JOB_ID");
  return job && *job && on_path("munge") && on_path("unmunge");
}

bool munge_works() {
  if (!on_path("munge") || !on_path("unmunge")) return false;
  try {
    return munge_open(munge_seal("dpt")) == "dpt";
  } catch (const std::exception&) {
    return false;
  }
}

bool token_by_munge_asked() {
  const char* v = std::getenv(kTokenByMunge);
  return v && std::string(v) == "1";
}

std::string munge_seal(const std::string& payload) {
  std::string cred =
      run_filter(with_socket({"munge", "--restrict-uid=" + std::to_string(::getuid())}), payload);
  while (!cred.empty() && (cred.back() == '\n' || cred.back() == '\r')) cred.pop_back();
  return cred;
}

std::string munge_open(const std::string& credential) {
  return run_filter(with_socket({"unmunge", "--metadata=/dev/null"}), credential + "\n");
}

}  // namespace dpt
