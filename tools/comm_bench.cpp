// comm_bench: the nccl-tests of this project. For each message size from -b to -e
// (times -f), it times -n iterations of one collective after -w warm-ups and prints one
// row: size count type redop algo time_us algbw busbw wrong. Times are the slowest
// rank's mean (an allreduce(max) of the per-rank times), as nccl-tests reports them.
//   mpirun -np 4 build/bin/comm_bench -b 8 -e 64M -f 2 --backend mpi --algo native
//   build/bin/launch -n 4 build/bin/comm_bench -b 1K -e 1G --coll reduce_scatter --backend tcp
// -c 1 re-runs each size once on fresh inputs and counts elements that differ from the
// exact expected result; the exit code is 1 when any rank saw a wrong element.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "comm/launch/env.h"
#include "comm/launch/launch_env.h"
#include "device/runtime.h"
#include "tools/comm_bench/check.h"
#include "tools/comm_bench/layout.h"
#include "tools/comm_bench/options.h"

using namespace dpt;
using namespace dpt::bench;

namespace {

struct Row {
  size_t size = 0, count = 0;
  std::string algo;
  double time_us = 0, algbw = 0, busbw = 0;
  int64_t wrong = 0;
};

// nccl-tests' spelling of the dtype for the "type" column.
const char* nccl_type_name(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f16: return "half";
    case DType::bf16: return "bfloat16";
    case DType::i8: return "int8";
    case DType::u8: return "uint8";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
  }
  return "?";
}

struct AlignedBytes {
  struct Free { void operator()(char* p) const { std::free(p); } };
  std::unique_ptr<char, Free> p;
  explicit AlignedBytes(size_t n) : p(static_cast<char*>(std::aligned_alloc(4096, std::max<size_t>(4096, (n + 4095) / 4096 * 4096)))) {
    if (!p) throw std::bad_alloc();
    std::memset(p.get(), 0, n);  // touch every page before timing
  }
  char* get() const { return p.get(); }
};

// The send/recv views of one row, honouring NCCL's in-place conventions.
struct Views {
  Buffer send, recv;
};

Views make_views(const Options& o, const Layout& l, char* sbase, char* rbase, int rank, Device dev = {}) {
  const size_t es = dtype_size(o.dtype);
  Views v{Buffer{sbase, l.send_count, o.dtype, dev}, Buffer{rbase, l.recv_count, o.dtype, dev}};
  if (!o.in_place) return v;
  switch (o.coll) {
    case CollKind::reduce_scatter:  // recv is send's own slot
      v.recv.data = sbase + size_t(rank) * l.piece * es;
      break;
    case CollKind::allgather:  // send is recv's own slot
      v.recv.data = rbase;
      v.send.data = rbase + size_t(rank) * l.piece * es;
      break;
    default:
      v.recv.data = sbase;
      break;
  }
  return v;
}

// The plain (blocking) form of the same call: what -z 1 times.
void run_blocking(Communicator& c, const Options& o, const Views& v) {
  switch (o.coll) {
    case CollKind::allreduce: return c.allreduce(v.send, v.recv, o.op);
    case CollKind::reduce_scatter: return c.reduce_scatter(v.send, v.recv, o.op);
    case CollKind::allgather: return c.allgather(v.send, v.recv);
    case CollKind::broadcast: return c.broadcast(v.recv, o.root);
    case CollKind::reduce: return c.reduce(v.send, v.recv, o.op, o.root);
    case CollKind::alltoall: return c.alltoall(v.send, v.recv);
    default: throw std::invalid_argument("collective not benchmarked");
  }
}

WorkPtr issue(Communicator& c, const Options& o, const Views& v) {
  switch (o.coll) {
    case CollKind::allreduce: return c.allreduce_async(v.send, v.recv, o.op);
    case CollKind::reduce_scatter: return c.reduce_scatter_async(v.send, v.recv, o.op);
    case CollKind::allgather: return c.allgather_async(v.send, v.recv);
    case CollKind::broadcast: return c.broadcast_async(v.recv, o.root);
    case CollKind::reduce: return c.reduce_async(v.send, v.recv, o.op, o.root);
    case CollKind::alltoall: return c.alltoall_async(v.send, v.recv);
    default: throw std::invalid_argument("collective not benchmarked");
  }
}

std::string algo_column(Communicator& c, const Options& o, const Views& v) {
  CollArgs a{o.coll, v.send, v.recv, o.op, o.root, parse_algo(o.algo)};
  return algo_name(c.resolve_algo(a));
}

// Fills the inputs of one row: send (or, for in-place broadcast/allgather, the part of
// recv that is this rank's input) and poisons the rest of recv so unwritten results show.
void prepare_check(const Options& o, const Layout& l, const Views& v, char* rbase, int rank) {
  const size_t es = dtype_size(o.dtype);
  std::memset(rbase, 0x5a, l.recv_count * es);
  if (o.coll == CollKind::broadcast) {
    if (rank == o.root) fill_input(v.recv.data, 0, l.recv_count, o.dtype, rank, o.op);
    return;
  }
  fill_input(v.send.data, 0, v.send.count, o.dtype, rank, o.op);
}

void print_header(const Options& o, Communicator& c, const std::string& backend) {
  std::printf("# comm_bench: %s, backend %s, %d ranks, algo %s, %s, %s\n", coll_name(o.coll), backend.c_str(), c.size(),
              o.algo.c_str(), o.in_place ? "in-place" : "out-of-place", o.blocking ? "blocking" : "non-blocking");
  std::printf("#  minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d validation: %d\n", o.min_bytes,
              o.max_bytes, o.factor, o.warmup, o.iters, o.check ? 1 : 0);
  std::printf("#  COMM_TCP_SHM=%s COMM_SEGMENT_BYTES=%s COMM_TREE_MAX_BYTES=%zu\n",
              env::get_string("COMM_TCP_SHM").c_str(), env::get_string(env::kSegmentBytes).c_str(),
              c.options().thresholds.get(env::kTreeMaxBytes));
  std::printf("#\n");
  std::printf("# %10s %12s %9s %6s %8s %11s %9s %9s %6s\n", "size", "count", "type", "redop", "algo", "time_us", "algbw",
              "busbw", "wrong");
  std::printf("# %10s %12s %9s %6s %8s %11s %9s %9s %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

void write_json(const std::string& path, const Options& o, const std::string& backend, int n,
                const std::vector<Row>& rows, double avg) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << "{\n  \"coll\": \"" << coll_name(o.coll) << "\", \"backend\": \"" << backend << "\", \"ranks\": " << n
    << ", \"type\": \"" << nccl_type_name(o.dtype) << "\", \"redop\": \"" << reduce_op_name(o.op)
    << "\", \"algo\": \"" << o.algo << "\", \"inplace\": " << (o.in_place ? "true" : "false")
    << ", \"device\": \"" << (o.on_device ? "cuda" : "cpu")
    << "\", \"tcp_shm\": \"" << env::get_string("COMM_TCP_SHM") << "\",\n  \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    char line[512];
    std::snprintf(line, sizeof line,
                  "    {\"size\": %zu, \"count\": %zu, \"algo\": \"%s\", \"time_us\": %.3f, \"algbw\": %.4f, "
                  "\"busbw\": %.4f, \"wrong\": %lld}%s\n",
                  r.size, r.count, r.algo.c_str(), r.time_us, r.algbw, r.busbw, static_cast<long long>(r.wrong),
                  i + 1 < rows.size() ? "," : "");
    f << line;
  }
  f << "  ],\n  \"avg_busbw\": " << avg << "\n}\n";
}

int run(const Options& o) {
  CommOptions copts = CommOptions::from_env();
  copts.algo = parse_algo(o.algo);
  const std::string backend_req = o.backend.empty() ? backends::default_name() : o.backend;
  auto comm = backends::create(backend_req, copts);
  Communicator& c = *comm;
  const int n = c.size(), r = c.rank();
  const bool root_prints = r == 0;
  if (o.in_place && o.coll == CollKind::alltoall) throw std::invalid_argument("alltoall cannot run in place");
  if ((o.coll == CollKind::broadcast || o.coll == CollKind::reduce) && o.root >= n)
    throw std::invalid_argument("-r root " + std::to_string(o.root) + " is not a rank of this world");

  const Layout biggest = layout_for(o.coll, o.max_bytes, o.dtype, n);
  const size_t es = dtype_size(o.dtype);
  // Host buffers; with --device cuda they are the host mirrors that inputs are written
  // to and results checked in, and the collectives run on device copies.
  AlignedBytes sbuf(biggest.send_count * es), rbuf(biggest.recv_count * es);
  Device dev{};
  device::DeviceMemory sdev, rdev;
  if (o.on_device) {
    dev = device::for_local_rank(detect_launch().local_rank);
    device::set_current(dev);
    sdev = device::DeviceMemory(dev, std::max<size_t>(1, biggest.send_count * es));
    rdev = device::DeviceMemory(dev, std::max<size_t>(1, biggest.recv_count * es));
  }
  auto to_device = [&](const Layout& l) {
    if (!o.on_device) return;
    device::copy(sdev.data(), sbuf.get(), l.send_count * es);
    device::copy(rdev.data(), rbuf.get(), l.recv_count * es);
  };
  if (root_prints) {
    print_header(o, c, c.backend_name());
    if (o.on_device) std::printf("# buffers on %s: %s\n#\n", dev.str().c_str(), device::describe().c_str());
  }

  std::vector<Row> rows;
  int64_t total_wrong = 0;
  double bw_sum = 0;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes = std::max(bytes * o.factor, bytes + 1)) {
    const Layout l = layout_for(o.coll, bytes, o.dtype, n);
    const Views hv = make_views(o, l, sbuf.get(), rbuf.get(), r);
    const Views v = o.on_device ? make_views(o, l, static_cast<char*>(sdev.data()), static_cast<char*>(rdev.data()), r, dev) : hv;
    prepare_check(o, l, hv, rbuf.get(), r);  // timing runs on the same kind of data
    to_device(l);
    for (int i = 0; i < o.warmup; ++i) issue(c, o, v)->wait();
    c.barrier();
    std::vector<WorkPtr> works;
    works.reserve(size_t(o.iters));
    const auto t0 = std::chrono::steady_clock::now();
    if (o.blocking) {
      for (int i = 0; i < o.iters; ++i) run_blocking(c, o, v);
    } else {
      for (int i = 0; i < o.iters; ++i) works.push_back(issue(c, o, v));
      for (auto& w : works) w->wait();
    }
    const auto t1 = std::chrono::steady_clock::now();
    double t_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / o.iters;
    c.allreduce(Buffer{&t_us, 1, DType::f64, {}}, Buffer{&t_us, 1, DType::f64, {}}, ReduceOp::max);

    int64_t wrong = 0;
    if (o.check) {
      prepare_check(o, l, hv, rbuf.get(), r);
      to_device(l);
      issue(c, o, v)->wait();
      if (o.on_device) {  // results back to the host mirrors (recv may lie in send, in place)
        device::copy(sbuf.get(), sdev.data(), l.send_count * es);
        device::copy(rbuf.get(), rdev.data(), l.recv_count * es);
      }
      wrong = int64_t(count_wrong(o.coll, hv.recv.data, l, o.dtype, o.op, r, n, o.root));
      c.allreduce(Buffer{&wrong, 1, DType::i64, {}}, Buffer{&wrong, 1, DType::i64, {}}, ReduceOp::sum);
    }
    Row row;
    row.size = l.size_bytes;
    row.count = l.piece;
    row.algo = algo_column(c, o, v);
    row.time_us = t_us;
    row.algbw = t_us > 0 ? double(l.size_bytes) / (t_us * 1e3) : 0;  // bytes/us/1e3 = GB/s
    row.busbw = row.algbw * busbw_factor(o.coll, n);
    row.wrong = o.check ? wrong : -1;
    total_wrong += o.check ? wrong : 0;
    bw_sum += row.busbw;
    if (root_prints) {
      std::printf("  %10zu %12zu %9s %6s %8s %11.2f %9.3f %9.3f %6s\n", row.size, row.count, nccl_type_name(o.dtype),
                  reduce_op_name(o.op), row.algo.c_str(), row.time_us, row.algbw, row.busbw,
                  o.check ? std::to_string(wrong).c_str() : "N/A");
      std::fflush(stdout);
    }
    rows.push_back(row);
  }
  const double avg = rows.empty() ? 0 : bw_sum / double(rows.size());
  if (root_prints) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(total_wrong), total_wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %.4f\n#\n", avg);
    std::fflush(stdout);
    if (!o.json_path.empty()) write_json(o.json_path, o, c.backend_name(), n, rows, avg);
  }
  c.barrier();
  return total_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (auto rc = parse_options(argc, argv, o)) return *rc;
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "comm_bench: error: " << e.what() << std::endl;
    backends::abort_job(1);
    return 1;
  }
}
