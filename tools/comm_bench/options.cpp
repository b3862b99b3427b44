#include "tools/comm_bench/options.h"

#include <cctype>
#include <stdexcept>

namespace dpt::bench {

size_t parse_size(const std::string& s) {
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + s + "' is not a size (use e.g. 8, 64K, 1M, 1G)");
  }
  std::string suffix = s.substr(pos);
  size_t mul = 1;
  if (suffix.empty()) mul = 1;
  else if (suffix == "K" || suffix == "k") mul = size_t(1) << 10;
  else if (suffix == "M" || suffix == "m") mul = size_t(1) << 20;
  else if (suffix == "G" || suffix == "g") mul = size_t(1) << 30;
  else throw std::invalid_argument("'" + s + "' has an unknown suffix (use K, M or G)");
  return size_t(v) * mul;
}

CollKind parse_coll(const std::string& s) {
  for (CollKind k : {CollKind::allreduce, CollKind::reduce_scatter, CollKind::allgather, CollKind::broadcast,
                     CollKind::reduce, CollKind::alltoall})
    if (s == coll_name(k)) return k;
  throw std::invalid_argument("unknown collective '" + s +
                              "'; valid: allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall");
}

static int parse_int(const std::string& flag, const std::string& v, int lo) {
  size_t pos = 0;
  int x = 0;
  try {
    x = std::stoi(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != v.size() || v.empty() || x < lo)
    throw std::invalid_argument(flag + " wants an integer >= " + std::to_string(lo) + ", got '" + v + "'");
  return x;
}

Options parse_options(int argc, char** argv) {
  Options o;
  struct Flag { const char* short_name; const char* long_name; bool takes_value; };
  static const Flag kFlags[] = {
      {"-b", "--minbytes", true}, {"-e", "--maxbytes", true}, {"-f", "--stepfactor", true},
      {"-n", "--iters", true},    {"-w", "--warmup_iters", true}, {"-c", "--check", true},
      {"-d", "--datatype", true}, {"-o", "--op", true},       {"-r", "--root", true},
      {nullptr, "--coll", true},  {nullptr, "--backend", true}, {nullptr, "--algo", true},
      {nullptr, "--json", true},  {nullptr, "--inplace", false}, {nullptr, "--device", true},
      {"-z", "--blocking", true},
      {"-h", "--help", false}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const Flag* flag = nullptr;
    for (const Flag& f : kFlags) {
      if (f.short_name && arg == f.short_name) flag = &f;
      else if (f.short_name && f.takes_value && arg.size() > 2 && arg.rfind(f.short_name, 0) == 0 && arg[1] != '-') {
        flag = &f;  // "-b8"
        value = arg.substr(2);
      } else if (arg == f.long_name) flag = &f;
      else if (f.takes_value && arg.rfind(std::string(f.long_name) + "=", 0) == 0) {
        flag = &f;  // "--minbytes=8"
        value = arg.substr(std::string(f.long_name).size() + 1);
      }
      if (flag) break;
    }
    if (!flag) throw std::invalid_argument("unknown option '" + arg + "'");
    const std::string name = flag->long_name;
    if (flag->takes_value && value.empty()) {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      value = argv[++i];
    }
    if (name == "--minbytes") o.min_bytes = parse_size(value);
    else if (name == "--maxbytes") o.max_bytes = parse_size(value);
    else if (name == "--stepfactor") o.factor = size_t(parse_int(arg, value, 2));
    else if (name == "--iters") o.iters = parse_int(arg, value, 1);
    else if (name == "--warmup_iters") o.warmup = parse_int(arg, value, 0);
    else if (name == "--check") o.check = parse_int(arg, value, 0) != 0;
    else if (name == "--datatype") o.dtype = parse_dtype(value);
    else if (name == "--op") o.op = parse_reduce_op(value);
    else if (name == "--root") o.root = parse_int(arg, value, 0);
    else if (name == "--coll") o.coll = parse_coll(value);
    else if (name == "--backend") o.backend = value;
    else if (name == "--algo") { parse_algo(value); o.algo = value; }
    else if (name == "--json") o.json_path = value;
    else if (name == "--inplace") o.in_place = true;
    else if (name == "--blocking") o.blocking = parse_int(arg, value, 0) != 0;
    else if (name == "--device") {
      if (value != "cpu" && value != "cuda") throw std::invalid_argument("--device must be cpu or cuda, not '" + value + "'");
      o.on_device = value == "cuda";
    }
    else if (name == "--help") o.help = true;
  }
  if (o.min_bytes > o.max_bytes) throw std::invalid_argument("-b (min bytes) is larger than -e (max bytes)");
  return o;
}

const char* usage() {
  static const std::string text = std::string("comm_bench: nccl-tests style collective benchmark\n"
         "  -b, --minbytes N      smallest message (bytes; K/M/G suffixes) [32M]\n"
         "  -e, --maxbytes N      largest message [32M]\n"
         "  -f, --stepfactor N    multiply the size by N each step [2]\n"
         "  -n, --iters N         timed iterations per size [20]\n"
         "  -w, --warmup_iters N  untimed iterations per size [5]\n"
         "  -c, --check 0|1       check results exactly after timing [1]\n"
         "  -d, --datatype T      int8 uint8 int32 int64 half float double bfloat16 [float]\n"
         "  -o, --op OP           sum prod min max avg [sum]\n"
         "  -r, --root R          root of broadcast and reduce [0]\n"
         "      --coll C          allreduce reduce_scatter allgather broadcast reduce alltoall [allreduce]\n"
         "      --backend B       mpi tcp nccl auto [COMM_BACKEND or auto]\n"
         "      --algo A          ") + algo::help_text() + " [auto]\n"
         "      --inplace         run in place (NCCL's conventions)\n"
         "  -z, --blocking 0|1    1: wait for each iteration before the next (caller-seen latency) [0]\n"
         "      --json FILE       also write the rows as JSON (rank 0)\n"
         "      --device D        cpu or cuda: where the buffers live (cuda: GPU LOCAL_RANK mod count) [cpu]\n"
         "Columns: size (bytes of the largest buffer), count (elements per rank's piece),\n"
         "time_us (slowest rank's mean), algbw = size/time, busbw = algbw * nccl-tests' factor,\n"
         "wrong = elements that differ from the exact expected result (-c 1).\n";
  return text.c_str();
}

}  // namespace dpt::bench
