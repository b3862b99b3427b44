#include "tools/launch/options.h"

#include <boost/program_options.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "comm/launch/env.h"
#include "api/cli/cli.h"

namespace launch {

namespace {

const char* const kUsage =
    "usage: launch -n N [--master-addr A] [--master-port P] [--grace-s S] [--no-prefix] [--bind cores] prog [args...]\n"
    "       launch --elastic -n MIN:MAX [--max-restarts K] [--nnodes H --node-rank I --rdzv-host A\n"
    "              --master-port P] prog [args...]\n"
    "       launch --print-env | --cleanup-shm\n"
    "Starts N local ranks of prog with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
    "MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default: a free port) set; prog's own\n"
    "arguments (everything after its name) pass through untouched.\n"
    "If a rank fails the others are stopped (SIGTERM, then SIGKILL after --grace-s,\n"
    "default 5) and launch exits non-zero. --print-env prints the COMM_* variables.\n"
    "When the job ends (by any means but launch's own SIGKILL), launch removes the shared\n"
    "memory its dead ranks left in /dev/shm; --cleanup-shm does it for the whole node.\n"
    "Threads: unless OMP_NUM_THREADS or OPENBLAS_NUM_THREADS is set, every rank gets\n"
    "OMP_NUM_THREADS = the cores launch may use / N (at least 1), as torchrun sets it,\n"
    "and OMP_WAIT_POLICY=PASSIVE where ranks would share cores; launch says what it set.\n"
    "Several hosts: one launch per host with --nnodes H --node-rank I and the same\n"
    "--master-addr/--rdzv-host and --master-port; RANK = I * N + LOCAL_RANK, or with\n"
    "--rank-order cyclic RANK = LOCAL_RANK * H + I (round robin over hosts, as Slurm's\n"
    "cyclic distribution and mpirun --map-by node number them).\n"
    "--elastic: node 0's launch serves the rendezvous store at MASTER_ADDR:MASTER_PORT;\n"
    "a dead rank does not stop the others (train --elastic re-forms without it), and\n"
    "with --max-restarts K up to K replacement processes join the running job. MAX\n"
    "processes start per node; the job ends with an error below H * MIN members.";

void print_env_table() {
  std::printf("| Variable | Default | Meaning |\n|---|---|---|\n");
  for (const auto& k : dpt::env::knobs())
    std::printf("| `%s` | %s | %s |\n", k.name, *k.default_value ? k.default_value : "(unset)", k.meaning);
}

// A whole number in [lo, hi], or an error naming the flag and the value.
double number(const std::string& flag, const std::string& v, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || errno || x < lo || x > hi)
    throw std::invalid_argument(flag + " needs a number in [" + std::to_string(static_cast<long>(lo)) + ", " +
                                std::to_string(static_cast<long>(hi)) + "], got '" + v + "'");
  return x;
}

// N or MIN:MAX.
void counts(const std::string& flag, const std::string& s, Options& o) {
  const auto colon = s.find(':');
  if (colon == std::string::npos) {
    o.nproc = o.min_nproc = static_cast<int>(number(flag, s, 1, 4096));
    return;
  }
  const double lo = number(flag + " (MIN of MIN:MAX)", s.substr(0, colon), 1, 4096);
  const double hi = number(flag + " (MAX of MIN:MAX)", s.substr(colon + 1), 1, 4096);
  if (lo > hi) throw std::invalid_argument(flag + " " + s + ": MIN is larger than MAX");
  o.min_nproc = static_cast<int>(lo);
  o.nproc = static_cast<int>(hi);
}

// One value under either of two names (torchrun's and ours); both given must agree.
std::string either(const boost::program_options::variables_map& vm, const char* a, const char* b) {
  const bool has_a = vm.count(a) > 0, has_b = vm.count(b) > 0;
  const std::string va = has_a ? vm[a].as<std::string>() : "", vb = has_b ? vm[b].as<std::string>() : "";
  if (has_a && has_b && va != vb)
    throw std::invalid_argument(std::string("--") + a + " '" + va + "' and --" + b + " '" + vb +
                                "' name the same setting: give one");
  return has_a ? va : vb;
}

}  // namespace

bool parse(int argc, char** argv, Options& o, int& exit_code) {
  namespace po = boost::program_options;
  std::string nnodes = "1", node_rank = "0", port, grace = "5", restarts = "0", order = "block";
  bool print_env = false;
  dpt::tools::Cli cli("launch", "flags");
  cli.help_text(kUsage);
  cli.flags().add_options()
    ("nproc,n", po::value<std::string>(), "N: processes on this node (elastic: MIN:MAX); also --nproc-per-node, -np")
    ("nnodes", po::value(&nnodes)->default_value(nnodes), "H: hosts of the job, one launch on each")
    ("node-rank", po::value(&node_rank)->default_value(node_rank), "I: this host's index, 0 to H-1")
    ("rank-order", po::value(&order)->default_value(order), "block (RANK = I * N + LOCAL_RANK) or cyclic (RANK = LOCAL_RANK * H + I)")
    ("master-addr", po::value<std::string>(), "rank 0's (elastic: node 0's store) address (default 127.0.0.1); also --rdzv-host")
    ("master-port", po::value(&port), "its port (default: a free one; required with --nnodes > 1)")
    ("grace-s", po::value(&grace)->default_value(grace), "seconds between SIGTERM and SIGKILL when a rank fails")
    ("no-prefix", po::bool_switch()->notifier([&o](bool on) { o.prefix = !on; }), "do not prefix each output line with [rank r]")
    ("elastic", po::bool_switch(&o.elastic), "a dead rank does not stop the others (train --elastic)")
    ("max-restarts", po::value(&restarts)->default_value(restarts), "elastic: replacement processes this launch may start in all")
    ("bind", po::value(&o.bind)->default_value(o.bind), "none | cores: cores gives each local rank its own block of the CPUs launch may use (as mpirun --bind-to core), printed at start")
    ("print-env", po::bool_switch(&print_env), "print the COMM_* environment variables as a table and exit")
    ("cleanup-shm", po::bool_switch(&o.cleanup_shm),
     "remove what dead processes left in /dev/shm (dpt objects whose creator is gone, and unmapped ones of older builds), say what, and exit");
  cli.hidden().add_options()
    ("nproc-per-node", po::value<std::string>(), "torchrun's name of --nproc")
    ("rdzv-host", po::value<std::string>(), "torchrun's name of --master-addr");
  cli.take_rest();  // the program and its own arguments
  cli.spelling("-np", "nproc");  // mpirun's
  const auto rc = cli.parse(argc, argv, [&](const po::variables_map& vm) {
    if (print_env || o.cleanup_shm) return;
    o.command = cli.rest();
    const std::string n = either(vm, "nproc", "nproc-per-node");
    if (n.empty()) throw std::invalid_argument("-n N is required (the processes to start on this node)");
    counts("-n", n, o);
    const bool ranged = n.find(':') != std::string::npos;
    o.nnodes = static_cast<int>(number("--nnodes", nnodes, 1, 4096));
    o.node_rank = static_cast<int>(number("--node-rank", node_rank, 0, 4095));
    if (order != "block" && order != "cyclic")
      throw std::invalid_argument("--rank-order takes block (RANK = I * N + LOCAL_RANK) or cyclic (RANK = LOCAL_RANK * H + I), got '" + order + "'");
    o.cyclic = order == "cyclic";
    if (o.bind != "none" && o.bind != "cores")
      throw std::invalid_argument("--bind takes none or cores, got '" + o.bind + "'");
    if (!port.empty()) o.master_port = static_cast<int>(number("--master-port", port, 1, 65535));
    const std::string addr = either(vm, "master-addr", "rdzv-host");
    if (vm.count("master-addr") || vm.count("rdzv-host")) {
      if (addr.empty()) throw std::invalid_argument("--master-addr needs an address");
      o.master_addr = addr;
    }
    o.grace_s = number("--grace-s", grace, 0, 3600);
    o.max_restarts = static_cast<int>(number("--max-restarts", restarts, 0, 1000000));
    if (o.command.empty()) throw std::invalid_argument("no program given (launch -n N prog [args...])");
    if (o.node_rank >= o.nnodes)
      throw std::invalid_argument("--node-rank " + std::to_string(o.node_rank) + " must be below --nnodes " + std::to_string(o.nnodes));
    if (ranged && !o.elastic) throw std::invalid_argument("-n MIN:MAX needs --elastic (a fixed job has one size)");
    if (o.max_restarts > 0 && !o.elastic)
      throw std::invalid_argument("--max-restarts needs --elastic (a fixed job stops when a rank dies)");
    if (o.nnodes > 1 && o.master_port == 0)
      throw std::invalid_argument("--nnodes " + std::to_string(o.nnodes) + ": every node needs the same --master-port");
  });
  if (rc) {
    exit_code = *rc;
    return false;
  }
  if (print_env) {
    print_env_table();
    exit_code = 0;
    return false;
  }
  return true;
}

}  // namespace launch
