// gloo_bench: Gloo's own allreduce / reduce_scatter over its TCP transport, timed and
// printed exactly like tools/comm_bench (same columns, slowest rank's mean time), so
// bench/compare.sh can put both in one table. Built only when libgloo-dev is found.
//   build/bin/launch -n 4 build/bin/gloo_bench --store /tmp/dir -b 4K -e 64M --algo ring_chunked
// Ranks come from RANK/WORLD_SIZE (tools/launch) or OMPI_COMM_WORLD_* (mpirun); they
// meet through a gloo::rendezvous::FileStore in --store (a fresh, empty directory).
// Algorithms: ring, ring_chunked, halving_doubling, bcube (allreduce);
// halving_doubling (reduce_scatter, Gloo's only one). float32 sum only.
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

int env_int(const char* a, const char* b) {
  for (const char* name : {a, b})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return -1;
}

size_t parse_size(const std::string& s) {
  size_t pos = 0;
  size_t v = std::stoull(s, &pos);
  switch (pos < s.size() ? s[pos] : ' ') {
    case 'K': case 'k': return v << 10;
    case 'M': case 'm': return v << 20;
    case 'G': case 'g': return v << 30;
    default: return v;
  }
}

struct Options {
  size_t min_bytes = 4096, max_bytes = 64u << 20, factor = 2;
  int iters = 20, warmup = 5;
  bool check = true;
  std::string algo = "ring_chunked", coll = "allreduce", store;
};

std::unique_ptr<gloo::Algorithm> make(const Options& o, const std::shared_ptr<gloo::Context>& ctx, float* data,
                                      size_t count, int n) {
  std::vector<float*> ptrs{data};
  const int c = static_cast<int>(count);
  if (o.coll == "reduce_scatter") {
    std::vector<int> recv(size_t(n), c / n);
    return std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(ctx, ptrs, c, recv);
  }
  if (o.algo == "ring") return std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, c);
  if (o.algo == "ring_chunked") return std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, c);
  if (o.algo == "halving_doubling") return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, c);
  if (o.algo == "bcube") return std::make_unique<gloo::AllreduceBcube<float>>(ctx, ptrs, c);
  throw std::invalid_argument("unknown --algo " + o.algo + " (ring, ring_chunked, halving_doubling, bcube)");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string f = argv[i], v = argv[i + 1];
    if (f == "-b") o.min_bytes = parse_size(v);
    else if (f == "-e") o.max_bytes = parse_size(v);
    else if (f == "-f") o.factor = std::stoul(v);
    else if (f == "-n") o.iters = std::stoi(v);
    else if (f == "-w") o.warmup = std::stoi(v);
    else if (f == "-c") o.check = v != "0";
    else if (f == "--algo") o.algo = v;
    else if (f == "--coll") o.coll = v;
    else if (f == "--store") o.store = v;
    else {
      std::cerr << "gloo_bench: unknown option " << f << "\n";
      return 2;
    }
  }
  const int rank = env_int("RANK", "OMPI_COMM_WORLD_RANK"), n = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
  if (rank < 0 || n < 1 || o.store.empty()) {
    std::cerr << "gloo_bench: needs RANK/WORLD_SIZE (or mpirun) and --store DIR\n";
    return 2;
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore fs(o.store);
    gloo::rendezvous::PrefixStore store("gloo_bench", fs);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
    ctx->setTimeout(std::chrono::seconds(120));
    ctx->connectFullMesh(store, dev);
    std::vector<double> tmax(1);
    gloo::AllreduceRing<double> time_max(ctx, {tmax.data()}, 1, gloo::ReductionFunction<double>::max);
    std::vector<float> buf(o.max_bytes / sizeof(float) + 1);
    const std::string algo = o.coll == "reduce_scatter" ? "halving_doubling" : o.algo;
    const double factor = o.coll == "reduce_scatter" ? double(n - 1) / n : 2.0 * (n - 1) / n;
    if (rank == 0) {
      std::printf("# gloo_bench: %s, gloo tcp, %d ranks, algo %s\n#\n", o.coll.c_str(), n, algo.c_str());
      std::printf("# %10s %12s %9s %6s %8s %11s %9s %9s %6s\n", "size", "count", "type", "redop", "algo", "time_us",
                  "algbw", "busbw", "wrong");
    }
    double bw_sum = 0;
    int rows = 0;
    long total_wrong = 0;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes = std::max(bytes * o.factor, bytes + 1)) {
      size_t count = bytes / sizeof(float);
      if (o.coll == "reduce_scatter") count = count / size_t(n) * size_t(n);
      if (count == 0) continue;
      auto alg = make(o, ctx, buf.data(), count, n);
      for (size_t i = 0; i < count; ++i) buf[i] = float((i + size_t(rank)) % 5);
      for (int i = 0; i < o.warmup; ++i) alg->run();
      long wrong = -1;
      if (o.check && o.coll == "allreduce") {
        for (size_t i = 0; i < count; ++i) buf[i] = float((i + size_t(rank)) % 5);
        alg->run();
        wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          double want = 0;
          for (int r = 0; r < n; ++r) want += double((i + size_t(r)) % 5);
          wrong += buf[i] != float(want);
        }
        total_wrong += wrong;
      }
      time_max.run();  // a barrier before timing
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters; ++i) alg->run();
      tmax[0] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
      time_max.run();
      const double t_us = tmax[0], algbw = double(count * sizeof(float)) / (t_us * 1e3), busbw = algbw * factor;
      bw_sum += busbw;
      ++rows;
      if (rank == 0) {
        std::printf("  %10zu %12zu %9s %6s %8s %11.2f %9.3f %9.3f %6s\n", count * sizeof(float),
                    o.coll == "reduce_scatter" ? count / size_t(n) : count, "float", "sum", algo.c_str(), t_us, algbw,
                    busbw, wrong < 0 ? "N/A" : std::to_string(wrong).c_str());
        std::fflush(stdout);
      }
    }
    if (rank == 0) std::printf("# Avg bus bandwidth    : %.4f\n#\n", rows ? bw_sum / rows : 0.0);
    return total_wrong ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "gloo_bench: error: " << e.what() << std::endl;
    return 1;
  }
}
