#pragma once
// The launcher's plumbing for one child's output and its exit status.
//
// Terms:
//   stream   one pipe from a child (its stdout or stderr) and where its lines go.
//   line     output is forwarded in whole lines only, each prefixed (e.g. "[rank 2] "),
//            so the ranks' lines never interleave mid-line.
#include <string>

namespace launch {

struct Stream {
  int fd = -1;      // read end of the child's pipe; -1 once at EOF
  int out_fd = 1;   // where its lines go
  std::string partial;
};

void write_all(int fd, const std::string& s);
// "launch: <s>" on stderr.
void say(const std::string& s);
std::string signal_text(int sig);
std::string describe_status(int status);
bool failed(int status);
// Emits the complete lines in `s.partial`, each prefixed; keeps the unfinished tail
// (all of it with flush_all).
void emit_lines(Stream& s, const std::string& prefix, bool flush_all);
// A free TCP port on 127.0.0.1, or 0.
int free_port();

}  // namespace launch
