#include "tools/comm_bench/options.h"

#include <boost/program_options.hpp>

#include <stdexcept>

#include "api/cli/cli.h"

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

std::optional<int> parse_options(int argc, char** argv, Options& o) {
  namespace po = boost::program_options;
  std::string min_bytes = "32M", max_bytes = "32M", dtype = "float", op = "sum", coll = "allreduce", device = "cpu";
  int factor = 2, check = 1, blocking = 0;
  tools::Cli cli("comm_bench", "flags ([default])");
  cli.help_text("comm_bench: nccl-tests style collective benchmark",
                "Columns: size (bytes of the largest buffer), count (elements per rank's piece),\n"
                "time_us (slowest rank's mean), algbw = size/time, busbw = algbw * nccl-tests' factor,\n"
                "wrong = elements that differ from the exact expected result (-c 1).");
  cli.flags().add_options()
    ("minbytes,b", po::value(&min_bytes)->default_value(min_bytes), "smallest message (bytes; K/M/G suffixes)")
    ("maxbytes,e", po::value(&max_bytes)->default_value(max_bytes), "largest message")
    ("stepfactor,f", po::value(&factor)->default_value(factor), "multiply the size by N each step")
    ("iters,n", po::value(&o.iters)->default_value(o.iters), "timed iterations per size")
    ("warmup_iters,w", po::value(&o.warmup)->default_value(o.warmup), "untimed iterations per size")
    ("check,c", po::value(&check)->default_value(check), "0|1: check results exactly after timing")
    ("datatype,d", po::value(&dtype)->default_value(dtype), "int8 uint8 int32 int64 half float double bfloat16")
    ("op,o", po::value(&op)->default_value(op), "sum prod min max avg")
    ("root,r", po::value(&o.root)->default_value(o.root), "root of broadcast and reduce")
    ("coll", po::value(&coll)->default_value(coll), "allreduce reduce_scatter allgather broadcast reduce alltoall")
    ("backend", po::value(&o.backend), "mpi tcp nccl auto (default: COMM_BACKEND or auto)")
    ("algo", po::value(&o.algo)->default_value(o.algo), algo::help_text().c_str())
    ("inplace", po::bool_switch(&o.in_place), "run in place (NCCL's conventions)")
    ("blocking,z", po::value(&blocking)->default_value(blocking), "0|1: 1 waits for each iteration before the next (caller-seen latency)")
    ("json", po::value(&o.json_path), "also write the rows as JSON (rank 0)")
    ("device", po::value(&device)->default_value(device), "cpu or cuda: where the buffers live (cuda: GPU LOCAL_RANK mod count)");
  return cli.parse(argc, argv, [&](const po::variables_map&) {
    auto size = [](const char* flag, const std::string& v) {
      try {
        return parse_size(v);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string(flag) + ": " + e.what());
      }
    };
    o.min_bytes = size("-b (--minbytes)", min_bytes);
    o.max_bytes = size("-e (--maxbytes)", max_bytes);
    if (factor < 2) throw std::invalid_argument("-f (--stepfactor) wants an integer >= 2, got " + std::to_string(factor));
    o.factor = size_t(factor);
    if (o.iters < 1) throw std::invalid_argument("-n (--iters) wants an integer >= 1, got " + std::to_string(o.iters));
    if (o.warmup < 0) throw std::invalid_argument("-w (--warmup_iters) wants an integer >= 0, got " + std::to_string(o.warmup));
    if (check < 0) throw std::invalid_argument("-c (--check) wants 0 or 1, got " + std::to_string(check));
    o.check = check != 0;
    if (o.root < 0) throw std::invalid_argument("-r (--root) wants an integer >= 0, got " + std::to_string(o.root));
    if (blocking < 0) throw std::invalid_argument("-z (--blocking) wants 0 or 1, got " + std::to_string(blocking));
    o.blocking = blocking != 0;
    o.dtype = parse_dtype(dtype);
    o.op = parse_reduce_op(op);
    o.coll = parse_coll(coll);
    parse_algo(o.algo);
    if (device != "cpu" && device != "cuda") throw std::invalid_argument("--device must be cpu or cuda, not '" + device + "'");
    o.on_device = device == "cuda";
    if (o.min_bytes > o.max_bytes) throw std::invalid_argument("-b (min bytes) is larger than -e (max bytes)");
  });
}

}  // namespace dpt::bench
