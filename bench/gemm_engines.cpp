// gemm_engines: GFLOP/s of each CPU GEMM engine (models/kernels/cpu/gemm_engine.h) on the products
// of one GPT-2 124M training step (batch 4 x 64 tokens), on 1 thread and on every core,
// each as a fraction of the measured fp32 FMA peak (bench/compute_peak.h); then the
// openblas engine again under each OPENBLAS_CORETYPE this CPU can run (Prescott,
// Haswell, SkylakeX, Cooperlake). Every engine runs in a child process of this program,
// alone, as a training process runs it: two engines in one process slow each other
// down on every core (oneDNN's OpenMP threads and OpenBLAS's threads spin-wait for work
// after each call, taking the cores the other one's threads need). The core types are
// set in those children's own environment (OpenBLAS reads it once, when it loads);
// nothing else sets it.
//
// Terms:
//   shapes      recorded: a GemmRecorder around one training step (forward, loss,
//               backward) of make_model("gpt2") at 124M, dropout 0: every product with
//               its transposes, leading dimensions and count per step (attention's per-head
//               products included). --shapes hand: the block's four linear layers and the
//               tied head, forward (NN) and both backward products (NT, TN), by hand.
//   GFLOP/s     2mnk / time of the best round (on a shared machine the least disturbed);
//               a round is enough calls of one shape to last ~10 ms.
//   step mix    every product of the step at its count: sum 2mnk / sum (count x best time).
//   % peak      GFLOP/s over the fp32 FMA peak at the same thread count (the faster of zmm
//               and ymm FMAs, best 50 ms window, measured before and after the engines).
//
//   bf16        gemm_bf16 (models/kernels/cpu/gemm.h) on the same shapes: operands converted to bf16 on
//               every call, fp32 accumulation; its % is of the AMX bf16 peak
//               (bench/compute_peak.h) where the CPU has AMX.
//   mkl-bf16    MKL's cblas_gemm_bf16bf16f32 (where the mkl engine loads): bf16 operands
//               already in bf16 (converted once), fp32 C; % of the AMX bf16 peak as bf16's.
//               Its own column, no engine runs it. --no-bf16 skips it too.
//   ceiling     oneDNN's matmul primitive with nothing of ours around it
//               (bench/onednn_ceiling.h): "f32"/"bf16" operands already in that type,
//               "packed" B pre-packed once into oneDNN's layout. The best this build's
//               libraries reach on the step's products: what no engine choice or call
//               pattern of ours can exceed without other kernels. --no-ceiling skips it.
//
//   grid        --shapes grid: NN, NT and TN products of every m, n, k in {16, 32, ..., 512, 2048}
//               (no model), to see where each engine wins.
//   model       --model gpt|cnn|mlp|resnet18 records that model's step instead, at its train
//               defaults (models/nn/model_config.h; --batch samples, --seq tokens for gpt): the
//               products a small model runs, which favour another engine than GPT-2's.
//
//   gemm_engines [--threads 1,2] [--seconds S] [--shapes record|hand|grid] [--batch 4 --seq 64]
//                [--coretypes A,B|none] [--no-bf16] [--no-ceiling] [--model gpt2]
//   (--seconds: per shape, engine and thread count; default 0.2)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/compute_peak.h"
#include "bench/onednn_ceiling.h"
#include "models/kernels/cpu/gemm.h"
#include "models/zoo/gpt2.h"
#include "models/zoo/models.h"

using namespace dpt;
using Clock = std::chrono::steady_clock;

namespace {

struct Entry {
  GemmShape shape;
  int64_t count = 1;
};

struct Options {
  std::vector<int> threads;
  double seconds = 0.2;
  std::string shapes = "record";
  std::vector<std::string> coretypes{"Prescott", "Haswell", "SkylakeX", "Cooperlake"};
  std::string child_engine, child_file;  // internal: one engine ("bf16": gemm_bf16), shapes from this file
  bool bf16 = true;                      // the gemm_bf16 column
  bool ceiling = true;                   // oneDNN matmul's own columns
  int batch = 4, seq = 64;               // the recorded step's sequences and tokens each
  std::string model = "gpt2";            // whose step is recorded (gpt2 at 124M)
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// One training step of `model` (gpt2: 124M; the others at their train defaults, the
// models/nn/model_config.h values) on `batch` random samples, every product recorded.
std::vector<Entry> recorded_shapes(const std::string& model_name, int batch, int seq) {
  ModelConfig cfg;
  if (model_name == "gpt2") {
    Gpt2Request req;
    req.size = "124M";
    configure_gpt2(req, cfg);
  }
  cfg.seq_len = seq;
  cfg.dropout = 0.0f;
  auto model = make_model(model_name, cfg);
  const bool tokens_in = model_name == "gpt" || model_name == "gpt2";
  std::mt19937_64 gen(1);
  ModelInput in;
  in.n = batch;
  std::vector<int32_t> tokens, labels;
  std::vector<float> pixels;
  if (tokens_in) {
    tokens.resize(size_t(batch) * size_t(seq));
    labels.resize(tokens.size());
    for (auto& t : tokens) t = int32_t(gen() % uint64_t(cfg.vocab));
    for (auto& l : labels) l = int32_t(gen() % uint64_t(cfg.vocab));
    in.tokens = tokens.data();
    in.sample_shape = {seq};
  } else {
    in.sample_shape = {cfg.in_channels, cfg.image_h, cfg.image_w};
    pixels.resize(size_t(batch * cfg.in_channels * cfg.image_h * cfg.image_w));
    for (auto& x : pixels) x = float(gen() % 1000) / 1000.0f;
    labels.resize(size_t(batch));
    for (auto& l : labels) l = int32_t(gen() % uint64_t(cfg.num_classes));
    in.x = pixels.data();
  }
  ModelTarget target;
  target.labels = labels.data();
  GemmRecorder rec;
  {
    GemmRecordScope scope(rec);
    model->train_step(in, target);
  }
  std::vector<Entry> v;
  for (const auto& [s, count] : rec.calls()) v.push_back({s, count});
  return v;
}

std::vector<Entry> hand_shapes(int rows) {
  // (out, in) of the block's linear layers, x12 blocks; the tied head once.
  std::vector<Entry> v;
  auto linear = [&](int out, int in, int64_t count) {
    v.push_back({{false, false, rows, out, in, in, out, out, false}, count});  // y = x W
    v.push_back({{false, true, rows, in, out, out, out, in, false}, count});   // dx = dy W^T
    v.push_back({{true, false, in, out, rows, in, out, out, true}, count});    // dW += x^T dy
  };
  linear(2304, 768, 12);
  linear(768, 768, 12);
  linear(3072, 768, 12);
  linear(768, 3072, 12);
  const int vocab = 50257;
  v.push_back({{false, true, rows, vocab, 768, 768, 768, vocab, false}, 1});  // logits = x E^T
  v.push_back({{false, false, rows, 768, vocab, vocab, 768, 768, false}, 1});  // dx = dlogits E
  v.push_back({{true, false, vocab, 768, rows, vocab, 768, 768, true}, 1});    // dE += dlogits^T x
  return v;
}

// Every NN, NT and TN product (beta 0 for NN, accumulating for the weight-gradient-like TN and
// NT ones as training runs them) of m, n, k in {16, 32, 64, 128, 256, 512, 2048}: where each
// engine wins, to set the 1-thread engine rule (models/kernels/cpu/gemm_choice.h) on.
std::vector<Entry> grid_shapes() {
  const int sizes[] = {16, 32, 64, 128, 256, 512, 2048};
  std::vector<Entry> v;
  for (int form = 0; form < 3; ++form)
    for (int m : sizes)
      for (int n : sizes)
        for (int k : sizes) {
          const bool ta = form == 2, tb = form == 1;
          v.push_back({{ta, tb, m, n, k, ta ? m : k, tb ? k : n, n, form != 0}, 1});
        }
  return v;
}

void save_shapes(const std::vector<Entry>& v, const std::string& path) {
  std::ofstream f(path);
  for (const auto& e : v)
    f << e.shape.trans_a << ' ' << e.shape.trans_b << ' ' << e.shape.m << ' ' << e.shape.n << ' ' << e.shape.k << ' '
      << e.shape.lda << ' ' << e.shape.ldb << ' ' << e.shape.ldc << ' ' << e.shape.accumulate << ' ' << e.count
      << '\n';
}

std::vector<Entry> load_shapes(const std::string& path) {
  std::ifstream f(path);
  std::vector<Entry> v;
  Entry e;
  while (f >> e.shape.trans_a >> e.shape.trans_b >> e.shape.m >> e.shape.n >> e.shape.k >> e.shape.lda >>
         e.shape.ldb >> e.shape.ldc >> e.shape.accumulate >> e.count)
    v.push_back(e);
  return v;
}

// Best seconds per call of `once`: a warm-up call, then rounds of about 10 ms until
// `seconds` have passed (at least 3); the best round wins (on a shared machine the least
// disturbed one).
template <class Once>
double best_seconds_per_call(Once&& once, double seconds) {
  auto t0 = Clock::now();
  once();
  const double first = std::chrono::duration<double>(Clock::now() - t0).count();
  const int reps = std::clamp(int(0.01 / std::max(first, 1e-7)), 1, 10000);  // ~10 ms rounds
  double best = 0;
  const auto start = Clock::now();
  for (int round = 0;; ++round) {
    t0 = Clock::now();
    for (int r = 0; r < reps; ++r) once();
    const double t = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
    if (best == 0 || t < best) best = t;
    if (round >= 2 && std::chrono::duration<double>(Clock::now() - start).count() >= seconds) break;
  }
  return best;
}

// Best seconds per call of engine e (gemm_bf16 when `bf16`) on one shape.
double time_shape(GemmEngine e, const GemmShape& s, double seconds, bool bf16 = false) {
  std::vector<float> a(static_cast<size_t>(s.trans_a ? s.k : s.m) * s.lda, 0.01f);
  std::vector<float> b(static_cast<size_t>(s.trans_b ? s.n : s.k) * s.ldb, 0.02f);
  std::vector<float> c(static_cast<size_t>(s.m) * s.ldc, 0.0f);
  const float beta = s.accumulate ? 1.0f : 0.0f;
  auto once = [&] {
    if (bf16)
      return gemm_bf16(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), s.lda, b.data(), s.ldb, beta, c.data(),
                       s.ldc);
    sgemm_with(e, s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), s.lda, b.data(), s.ldb, beta, c.data(), s.ldc);
  };
  once();  // warm-up: threads, oneDNN's JIT, pages
  return best_seconds_per_call(once, seconds);
}

// Best seconds per call of MKL's cblas_gemm_bf16bf16f32 on one shape, operands in bf16
// already; 0 where MKL lacks it.
double time_mkl_bf16(const GemmShape& s, double seconds) {
  auto bf16_of = [](float x) {  // round to nearest even (the values here are finite)
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  };
  std::vector<unsigned short> a(static_cast<size_t>(s.trans_a ? s.k : s.m) * s.lda, bf16_of(0.01f));
  std::vector<unsigned short> b(static_cast<size_t>(s.trans_b ? s.n : s.k) * s.ldb, bf16_of(0.02f));
  std::vector<float> c(static_cast<size_t>(s.m) * s.ldc, 0.0f);
  const float beta = s.accumulate ? 1.0f : 0.0f;
  auto once = [&] {
    return mkl_gemm_bf16(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), s.lda, b.data(), s.ldb, beta, c.data(),
                         s.ldc);
  };
  if (!once()) return 0.0;  // warm-up
  return best_seconds_per_call(once, seconds);
}

// "NT   256 x   768 x   768", then "+=" for beta 1 and the leading dimensions where
// they are not the dense ones (attention's heads are strided views).
std::string shape_label(const GemmShape& s) {
  char buf[128];
  int n = std::snprintf(buf, sizeof buf, "%c%c %5d x %5d x %5d%s", s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', s.m,
                        s.n, s.k, s.accumulate ? " +=" : "");
  const int dense_a = s.trans_a ? s.m : s.k, dense_b = s.trans_b ? s.k : s.n;
  if (s.lda != dense_a || s.ldb != dense_b || s.ldc != s.n)
    std::snprintf(buf + n, sizeof buf - size_t(n), " ld %d,%d,%d", s.lda, s.ldb, s.ldc);
  return buf;
}

// [threads] -> seconds per call of each shape.
using Timings = std::map<int, std::vector<double>>;

double mix_gflops(const std::vector<Entry>& shapes, const std::vector<double>& t) {
  double flops = 0, secs = 0;
  for (size_t i = 0; i < shapes.size() && i < t.size(); ++i) {
    flops += shapes[i].shape.flops() * double(shapes[i].count);
    secs += t[i] * double(shapes[i].count);
  }
  // A shape without a time (its primitive could not be made) leaves no mix.
  const bool all = t.size() == shapes.size() && std::all_of(t.begin(), t.end(), [](double x) { return x > 0; });
  return secs > 0 && all ? flops / secs / 1e9 : 0.0;
}

// The child: one engine, alone in its process; machine-readable lines.
// A ceiling column's child: "ceiling-f32", "ceiling-bf16-packed", ...
int run_ceiling_child(const Options& o) {
  const bool bf16 = o.child_engine.find("bf16") != std::string::npos;
  const bool packed = o.child_engine.find("packed") != std::string::npos;
  const auto shapes = load_shapes(o.child_file);
  std::string impls;  // the implementations oneDNN chose, each once
  for (int th : o.threads) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const GemmShape& g = shapes[i].shape;
      const bench::CeilingShape s{g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.accumulate};
      const bench::CeilingResult r = bench::onednn_matmul_ceiling(s, bf16, packed, th, o.seconds);
      if (!r.impl.empty() && (" " + impls + ",").find(" " + r.impl + ",") == std::string::npos)
        impls += (impls.empty() ? "" : ", ") + r.impl;
      std::printf("t %d %zu %.9g\n", th, i, r.seconds);
    }
  }
  std::printf("label oneDNN %s matmul, %s operands in place, B %s: %s\n", onednn_version().c_str(),
              bf16 ? "bf16" : "f32", packed ? "pre-packed" : "plain", impls.c_str());
  return 0;
}

int run_child(const Options& o) {
  if (o.child_engine.rfind("ceiling", 0) == 0) return run_ceiling_child(o);
  if (o.child_engine == "mkl-bf16") {
    const auto shapes = load_shapes(o.child_file);
    std::printf("label %s, cblas_gemm_bf16bf16f32, bf16 operands in place\n", mkl_version().c_str());
    for (int th : o.threads) {
      set_blas_threads(th);
      for (size_t i = 0; i < shapes.size(); ++i)
        std::printf("t %d %zu %.9g\n", th, i, time_mkl_bf16(shapes[i].shape, o.seconds));
    }
    return 0;
  }
  const bool bf16 = o.child_engine == "bf16";  // gemm_bf16 (models/kernels/cpu/gemm.h)
  const auto engine = bf16 ? std::optional<GemmEngine>(gemm_engine()) : parse_gemm_engine(o.child_engine);
  if (!engine) throw std::invalid_argument("--child: unknown engine " + o.child_engine);
  const auto shapes = load_shapes(o.child_file);
  std::printf("label %s\n", bf16 ? bf16_gemm_description().c_str() : gemm_engine_label(*engine).c_str());
  for (int th : o.threads) {
    set_blas_threads(th);
    for (size_t i = 0; i < shapes.size(); ++i)
      std::printf("t %d %zu %.9g\n", th, i, time_shape(*engine, shapes[i].shape, o.seconds, bf16));
  }
  std::printf("core %s\n", openblas_core_name().c_str());
  return 0;
}

struct Column {
  std::string title;          // "openblas", "onednn", "openblas Prescott"
  std::string label, core;    // the child's engine label, OpenBLAS's core there
  Timings timings;
  std::string error;
  bool amx = false;  // % of the AMX bf16 peak, not the fp32 one
};

// Runs one engine in a child of this program; `coretype` (if any) goes into its environment.
Column spawn_child(const std::string& title, const std::string& engine, const std::string& coretype,
                   const std::string& file, const Options& o) {
  Column r;
  r.title = title;
  int fds[2];
  if (::pipe(fds) != 0) {
    r.error = "pipe failed";
    return r;
  }
  std::string threads;
  for (int t : o.threads) threads += (threads.empty() ? "" : ",") + std::to_string(t);
  const std::string secs = std::to_string(o.seconds);
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    if (!coretype.empty()) ::setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
    ::unsetenv("OPENBLAS_NUM_THREADS");  // the child sets its threads per run
    const char* argv[] = {"gemm_engines", "--child",   engine.c_str(), file.c_str(), "--threads",
                          threads.c_str(), "--seconds", secs.c_str(),   nullptr};
    ::execv("/proc/self/exe", const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    r.error = "child failed (wait status " + std::to_string(status) + ")";
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string tag;
    ls >> tag;
    if (tag == "label") {
      std::getline(ls >> std::ws, r.label);
    } else if (tag == "core") {
      ls >> r.core;
    } else if (tag == "t") {
      int th = 0;
      size_t i = 0;
      double t = 0;
      ls >> th >> i >> t;
      auto& v = r.timings[th];
      if (v.size() <= i) v.resize(i + 1, 0.0);
      v[i] = t;
    }
  }
  return r;
}

bool can_run_core(const std::string& core) {
  const CpuFeatures& f = cpu_features();
  if (core == "Prescott") return f.sse3;
  if (core == "Haswell" || core == "Zen") return f.avx2 && f.fma;
  if (core == "SkylakeX") return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512cd;
  if (core == "Cooperlake") return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16;
  return true;  // another name: OpenBLAS decides
}

Options parse(int argc, char** argv) {
  Options o;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  o.threads = cores > 1 ? std::vector<int>{1, cores} : std::vector<int>{1};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--threads") {
      o.threads.clear();
      for (const auto& t : split(value())) o.threads.push_back(std::stoi(t));
    } else if (a == "--seconds") {
      o.seconds = std::stod(value());
    } else if (a == "--shapes") {
      o.shapes = value();
      if (o.shapes != "record" && o.shapes != "hand" && o.shapes != "grid")
        throw std::invalid_argument("--shapes record|hand|grid");
    } else if (a == "--coretypes") {
      const std::string v = value();
      o.coretypes = v == "none" ? std::vector<std::string>{} : split(v);
    } else if (a == "--no-bf16") {
      o.bf16 = false;
    } else if (a == "--no-ceiling") {
      o.ceiling = false;
    } else if (a == "--batch" || a == "--seq") {
      const int v = std::stoi(value());
      if (v < 1) throw std::invalid_argument(a + " must be at least 1");
      (a == "--batch" ? o.batch : o.seq) = v;
    } else if (a == "--model") {
      o.model = value();
    } else if (a == "--child") {
      o.child_engine = value();
      o.child_file = value();
    } else if (a == "--help" || a == "-h") {
      std::printf("gemm_engines [--threads 1,%d] [--seconds 0.2] [--shapes record|hand|grid] [--batch 4 --seq 64] "
                  "[--coretypes Prescott,Haswell,SkylakeX,Cooperlake|none] [--no-bf16] [--no-ceiling] "
                  "[--model gpt2|gpt|cnn|mlp|resnet18]\n", cores);
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown argument " + a + " (--help)");
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (!o.child_engine.empty()) return run_child(o);

  const CpuFeatures& f = cpu_features();
  const auto engines = available_gemm_engines();
  std::printf("# gemm_engines: %u cores; cpu fp32 level %s (avx512f %d, avx512_bf16 %d, amx_bf16 %d)\n",
              std::thread::hardware_concurrency(), simd_level_name(f.fp32_level()), f.avx512f, f.avx512_bf16,
              f.amx_bf16);
  for (GemmEngine e : engines) std::printf("# engine %s\n", gemm_engine_label(e).c_str());
  if (!gemm_engine_available(GemmEngine::mkl))
    std::printf("# engine mkl: unavailable: %s\n", gemm_engine_unavailable_reason(GemmEngine::mkl).c_str());
  std::printf("# sgemm() runs %s\n", gemm_engine_description().c_str());
  std::fflush(stdout);

  const auto t_rec = Clock::now();
  const std::vector<Entry> shapes = o.shapes == "hand"   ? hand_shapes(o.batch * o.seq)
                                    : o.shapes == "grid" ? grid_shapes()
                                                         : recorded_shapes(o.model, o.batch, o.seq);
  const double record_s = std::chrono::duration<double>(Clock::now() - t_rec).count();
  double step_flops = 0;
  int64_t calls = 0;
  for (const auto& e : shapes) step_flops += e.shape.flops() * double(e.count), calls += e.count;
  if (o.shapes == "grid") {
    std::printf("# shapes: a grid of NN, NT and TN products, m, n, k in 16..2048: %zu, %.2f GFLOP in all\n",
                shapes.size(), step_flops / 1e9);
  } else {
    const std::string what =
        o.shapes == "hand" || o.model == "gpt2" ? "GPT-2 124M" : "'" + o.model + "' (train's default)";
    std::printf("# shapes: %s training step, batch %d x %d tokens, %s: %zu distinct, %lld calls, %.2f GFLOP\n",
                what.c_str(), o.batch, o.seq, o.shapes == "hand" ? "by hand" : "recorded", shapes.size(),
                (long long)calls, step_flops / 1e9);
  }
  if (o.shapes == "record") std::printf("# (model built and step recorded in %.1f s)\n", record_s);

  // The peak: measured before and after the engines, the higher kept (a neighbour's
  // job on a shared machine can hold a core for a whole measurement).
  std::map<int, double> peak;
  for (int th : o.threads) peak[th] = bench::fp32_peak_gflops(th, 0.5);
  std::map<int, double> amx;  // the bf16 column's peak

  // Every engine, then openblas under each core type this CPU runs, one child each.
  char path[] = "/tmp/gemm_engines_shapes_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  save_shapes(shapes, path);
  std::vector<Column> columns;
  for (GemmEngine e : engines) columns.push_back(spawn_child(gemm_engine_name(e), gemm_engine_name(e), "", path, o));
  // gemm_bf16: bf16 operands (converted on every call), fp32 accumulation; its % is of
  // the AMX bf16 peak where the CPU has AMX (else of the fp32 peak: it is emulated there
  // or runs on AVX512-BF16). Skipped with --no-bf16.
  const bool amx_peak = bench::peak_supported(bench::Peak::amx_bf16);
  if (o.bf16) {
    columns.push_back(spawn_child("bf16", "bf16", "", path, o));
    columns.back().amx = amx_peak;
    if (gemm_engine_available(GemmEngine::mkl)) {
      if (mkl_gemm_bf16(false, false, 0, 0, 0, 1.0f, nullptr, 1, nullptr, 1, 0.0f, nullptr, 1)) {
        columns.push_back(spawn_child("mkl-bf16", "mkl-bf16", "", path, o));
        columns.back().amx = amx_peak;
      } else {
        std::printf("# mkl-bf16: not run, this MKL has no cblas_gemm_bf16bf16f32\n");
      }
    }
  }
  if (o.ceiling && bench::onednn_ceiling_available()) {
    for (const char* kind : {"ceiling-f32", "ceiling-f32-packed"})
      columns.push_back(spawn_child(kind, kind, "", path, o));
    if (o.bf16 && bf16_gemm_native())
      for (const char* kind : {"ceiling-bf16", "ceiling-bf16-packed"}) {
        columns.push_back(spawn_child(kind, kind, "", path, o));
        columns.back().amx = amx_peak;
      }
  } else if (o.ceiling) {
    std::printf("# ceiling columns: not run, this build has no oneDNN\n");
  }
  for (const auto& core : o.coretypes) {
    if (!can_run_core(core)) {
      std::printf("# OPENBLAS_CORETYPE=%s: not run, this CPU lacks its instructions\n", core.c_str());
      continue;
    }
    columns.push_back(spawn_child("openblas " + core, "openblas", core, path, o));
    if (columns.back().core != core)
      std::printf("# OPENBLAS_CORETYPE=%s: OpenBLAS ran %s\n", core.c_str(), columns.back().core.c_str());
  }
  ::unlink(path);
  for (int th : o.threads) {
    peak[th] = std::max(peak[th], bench::fp32_peak_gflops(th, 0.5));
    std::printf("# fp32 FMA peak, %d thread%s: %.1f GFLOP/s\n", th, th == 1 ? "" : "s", peak[th]);
    if (o.bf16 && amx_peak) {
      amx[th] = bench::peak_gflops(bench::Peak::amx_bf16, th, 0.5);
      std::printf("# AMX bf16 peak, %d thread%s: %.1f GFLOP/s (the bf16 column's %%)\n", th, th == 1 ? "" : "s",
                  amx[th]);
    }
  }
  for (const auto& c : columns) {
    std::printf("# column %-20s %s\n", c.title.c_str(), c.label.c_str());
    if (!c.error.empty()) std::printf("# column %s: %s\n", c.title.c_str(), c.error.c_str());
  }

  // Table: GFLOP/s (% of the fp32 FMA peak at that thread count).
  auto pad = [](std::string x, size_t width) {
    return x.size() < width ? x + std::string(width - x.size(), ' ') : x + " ";
  };
  std::string head = pad("threads  shape", 45) + " calls";
  for (const auto& c : columns) head += "  " + pad(c.title, 18);
  std::printf("\n%s\n", head.c_str());
  auto cell = [](double gflops, double pk) {
    if (!(gflops > 0)) return std::string("        -           ");
    char buf[40];
    std::snprintf(buf, sizeof buf, "  %7.1f (%3.0f%%)    ", gflops, pk > 0 ? 100 * gflops / pk : 0.0);
    return std::string(buf);
  };
  auto seconds_of = [](const Column& c, int th, size_t i) {
    const auto it = c.timings.find(th);
    return it != c.timings.end() && i < it->second.size() ? it->second[i] : 0.0;
  };
  for (int th : o.threads) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "%7d  %-36s %6lld", th, shape_label(shapes[i].shape).c_str(),
                    (long long)shapes[i].count);
      std::string line = buf;
      for (const auto& c : columns) {
        const double t = seconds_of(c, th, i);
        line += cell(t > 0 ? shapes[i].shape.flops() / t / 1e9 : 0.0, c.amx ? amx[th] : peak[th]);
      }
      std::printf("%s\n", line.c_str());
    }
    char buf[128];
    std::snprintf(buf, sizeof buf, "%7d  %-36s %6lld", th, "step mix", (long long)calls);
    std::string line = buf;
    for (const auto& c : columns) {
      const auto it = c.timings.find(th);
      line += cell(it != c.timings.end() ? mix_gflops(shapes, it->second) : 0.0, c.amx ? amx[th] : peak[th]);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gemm_engines: %s\n", e.what());
  return 1;
}
