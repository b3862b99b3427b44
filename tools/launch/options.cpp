#include "tools/launch/options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "comm/env.h"
#include "tools/launch/process_io.h"

namespace launch {

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: launch -n N [--master-addr A] [--master-port P] [--grace-s S] [--no-prefix] prog [args...]\n"
               "       launch --elastic -n MIN:MAX [--max-restarts K] [--nnodes H --node-rank I --rdzv-host A\n"
               "              --master-port P] prog [args...]\n"
               "       launch --print-env\n"
               "Starts N local ranks of prog with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
               "MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default: a free port) set.\n"
               "If a rank fails the others are stopped (SIGTERM, then SIGKILL after --grace-s,\n"
               "default 5) and launch exits non-zero. --print-env prints the COMM_* variables.\n"
               "Several hosts: one launch per host with --nnodes H --node-rank I and the same\n"
               "--master-addr/--rdzv-host and --master-port; RANK = I * N + LOCAL_RANK, or with\n"
               "--rank-order cyclic RANK = LOCAL_RANK * H + I (round robin over hosts, as Slurm's\n"
               "cyclic distribution and mpirun --map-by node number them).\n"
               "--elastic: node 0's launch serves the rendezvous store at MASTER_ADDR:MASTER_PORT;\n"
               "a dead rank does not stop the others (train --elastic re-forms without it), and\n"
               "with --max-restarts K up to K replacement processes join the running job. MAX\n"
               "processes start per node; the job ends with an error below H * MIN members.\n");
}

void print_env_table() {
  std::printf("| Variable | Default | Meaning |\n|---|---|---|\n");
  for (const auto& k : dpt::env::knobs())
    std::printf("| `%s` | %s | %s |\n", k.name, *k.default_value ? k.default_value : "(unset)", k.meaning);
}

bool number(const std::string& flag, const char* v, double lo, double hi, double& out) {
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
}

// N or MIN:MAX.
bool counts(const std::string& flag, const char* v, Options& o) {
  const std::string s = v ? v : "";
  const auto colon = s.find(':');
  double lo = 0, hi = 0;
  if (colon == std::string::npos) {
    if (!number(flag, v, 1, 4096, hi)) return false;
    o.nproc = o.min_nproc = static_cast<int>(hi);
    return true;
  }
  const std::string a = s.substr(0, colon), b = s.substr(colon + 1);
  if (!number(flag + " (MIN of MIN:MAX)", a.c_str(), 1, 4096, lo) ||
      !number(flag + " (MAX of MIN:MAX)", b.c_str(), 1, 4096, hi))
    return false;
  if (lo > hi) {
    say(flag + " " + s + ": MIN is larger than MAX");
    return false;
  }
  o.min_nproc = static_cast<int>(lo);
  o.nproc = static_cast<int>(hi);
  return true;
}

}  // namespace

bool parse(int argc, char** argv, Options& o, int& exit_code) {
  int i = 1;
  bool ranged = false;
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
      const char* v = next();
      if (!counts(a, v, o)) return false;
      ranged = v && std::string(v).find(':') != std::string::npos;
    } else if (a == "--nnodes") {
      if (!number(a, next(), 1, 4096, x)) return false;
      o.nnodes = static_cast<int>(x);
    } else if (a == "--rank-order") {
      const char* v = next();
      const std::string order = v ? v : "";
      if (order != "block" && order != "cyclic") {
        say("--rank-order takes block (RANK = I * N + LOCAL_RANK) or cyclic (RANK = LOCAL_RANK * H + I)");
        return false;
      }
      o.cyclic = order == "cyclic";
    } else if (a == "--node-rank") {
      if (!number(a, next(), 0, 4095, x)) return false;
      o.node_rank = static_cast<int>(x);
    } else if (a == "--master-port") {
      if (!number(a, next(), 1, 65535, x)) return false;
      o.master_port = static_cast<int>(x);
    } else if (a == "--master-addr" || a == "--rdzv-host") {
      const char* v = next();
      if (!v || !*v) {
        say(a + " needs an address");
        return false;
      }
      o.master_addr = v;
    } else if (a == "--grace-s") {
      if (!number(a, next(), 0, 3600, o.grace_s)) return false;
    } else if (a == "--no-prefix") {
      o.prefix = false;
    } else if (a == "--elastic") {
      o.elastic = true;
    } else if (a == "--max-restarts") {
      if (!number(a, next(), 0, 1000000, x)) return false;
      o.max_restarts = static_cast<int>(x);
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
  if (o.node_rank >= o.nnodes) {
    say("--node-rank " + std::to_string(o.node_rank) + " must be below --nnodes " + std::to_string(o.nnodes));
    return false;
  }
  if (ranged && !o.elastic) {
    say("-n MIN:MAX needs --elastic (a fixed job has one size)");
    return false;
  }
  if (o.max_restarts > 0 && !o.elastic) {
    say("--max-restarts needs --elastic (a fixed job stops when a rank dies)");
    return false;
  }
  if (o.nnodes > 1 && o.master_port == 0) {
    say("--nnodes " + std::to_string(o.nnodes) + ": every node needs the same --master-port");
    return false;
  }
  return true;
}

}  // namespace launch
