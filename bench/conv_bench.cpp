// conv_bench: Conv2d forward and backward against OpenBLAS sgemm on the same shapes.
//   build/bin/conv_bench [--batch 32] [--size 32] [--stem imagenet|cifar] [--seconds 0.5]
//                        [--precision fp32|bf16]
// (DPT_CONV=im2col|onednn|auto picks Conv2d's kernel; the last column names it.)
// For every distinct convolution of ResNet-18 at that input (batch x 3 x size x size),
// times our Conv2d forward, and backward (weight gradient and input gradient), records
// the sgemm calls each issues (models/kernels/cpu/gemm.h) and times raw sgemm on exactly those calls.
// Columns:
//   layer shape   C -> OC, kernel/stride, input HxW
//   fwd ms, bwd ms       best-of-rounds time of our forward / backward (rounds alternate
//                        with the sgemm rounds, so both see the same machine), in CPU time of the
//                        process (CLOCK_PROCESS_CPUTIME_ID): time other processes take
//                        the cores away is not counted, which wall time on a shared
//                        machine cannot promise; with several BLAS threads it is their sum
//                        (FLOP per CPU-second, the same measure on both sides)
//   sgemm fwd/bwd ms     raw sgemm on the same calls (the GEMM part alone)
//   fwd %, bwd %         sgemm time / our time = our FLOP/s as a fraction of sgemm's on
//                        the same shapes (100% = im2col, col2im and copies cost nothing)
//   GFLOP/s              nominal convolution FLOPs (2*N*OC*C*K*K*OH*OW, dead taps
//                        included, as PyTorch's counters count) / our fwd+bwd time
// The last row sums every convolution of one ResNet-18 step (each shape x its count).
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <functional>
#include <map>
#include <utility>
#include <string>
#include <tuple>
#include <vector>

#include "models/kernels/cpu/gemm.h"
#include "models/nn/layers/conv2d.h"
#include "models/kernels/cpu/conv_engine.h"

using namespace dpt;

namespace {

struct ConvShape {
  int64_t c, oc, k, stride, pad, h;
  int count;  // how many convolutions of ResNet-18 have this shape
};

std::vector<ConvShape> resnet18_convs(int64_t size, bool imagenet) {
  std::vector<ConvShape> v;
  int64_t h = size;
  if (imagenet) {
    v.push_back({3, 64, 7, 2, 3, h, 1});
    h = (h + 6 - 7) / 2 + 1;
    h = (h + 2 - 3) / 2 + 1;  // max-pool
  } else {
    v.push_back({3, 64, 3, 1, 1, h, 1});
  }
  v.push_back({64, 64, 3, 1, 1, h, 4});  // layer1
  int64_t c = 64;
  for (int64_t oc : {128, 256, 512}) {
    const int64_t oh = (h + 2 - 3) / 2 + 1;
    v.push_back({c, oc, 3, 2, 1, h, 1});   // block 0 conv1
    v.push_back({c, oc, 1, 2, 0, h, 1});   // downsample
    v.push_back({oc, oc, 3, 1, 1, oh, 3});  // block 0 conv2, block 1 conv1 and conv2
    c = oc;
    h = oh;
  }
  return v;
}

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Best-of-rounds times of f and g, measured alternately (f, g, f, g, ...) so that both
// see the same moments of a shared machine.
std::pair<double, double> best_alternating(const std::function<void()>& f, const std::function<void()>& g,
                                           double min_seconds) {
  f();  // warm-up
  g();
  double best_f = 1e30, best_g = 1e30;
  const double start = cpu_now();
  do {
    double t0 = cpu_now();
    f();
    best_f = std::min(best_f, cpu_now() - t0);
    t0 = cpu_now();
    g();
    best_g = std::min(best_g, cpu_now() - t0);
  } while (cpu_now() - start < min_seconds);
  return {best_f, best_g};
}

// Raw sgemm on `rec`'s calls (each shape as often as recorded), on scratch operands
// allocated once.
class RecordedGemms {
 public:
  explicit RecordedGemms(const GemmRecorder& rec) : rec_(rec) {
    size_t max_a = 0, max_b = 0, max_c = 0;
    for (const auto& [g, count] : rec.calls()) {
      max_a = std::max(max_a, size_t(g.trans_a ? g.k : g.m) * size_t(g.lda));
      max_b = std::max(max_b, size_t(g.trans_b ? g.n : g.k) * size_t(g.ldb));
      max_c = std::max(max_c, size_t(g.m) * size_t(g.ldc));
    }
    a_.assign(max_a, 0.01f);
    b_.assign(max_b, 0.02f);
    c_.assign(max_c, 0.0f);
  }
  void operator()() {
    for (const auto& [g, count] : rec_.calls())
      for (int64_t i = 0; i < count; ++i)
        sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a_.data(), g.lda, b_.data(), g.ldb,
              g.accumulate ? 1.0f : 0.0f, c_.data(), g.ldc);
  }

 private:
  const GemmRecorder& rec_;
  std::vector<float> a_, b_, c_;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 32, size = 32;
  std::string stem = "imagenet";
  double min_seconds = 0.5;
  bool bf16 = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--batch") batch = std::stoll(v);
    else if (k == "--size") size = std::stoll(v);
    else if (k == "--stem") stem = v;
    else if (k == "--seconds") min_seconds = std::stod(v);
    else if (k == "--precision" && (v == "fp32" || v == "bf16")) bf16 = v == "bf16";
    else {
      std::fprintf(stderr, "conv_bench: unknown option or value: %s %s\n", k.c_str(), v.c_str());
      return 2;
    }
  }
  // bf16: Conv2d's products in bf16 (oneDNN's bf16 convolutions, or gemm_bf16 under
  // im2col) where bf16_gemm_native(), as Module::set_gemm_precision makes them.
  const GemmPrecisionScope precision(bf16 ? GemmPrecision::bf16 : GemmPrecision::f32);
  std::printf("Conv2d vs sgemm, ResNet-18 convolutions, batch %lld, %lldx%lld input, %s stem, %s\n", (long long)batch,
              (long long)size, (long long)size, stem.c_str(), bf16 ? bf16_gemm_description().c_str() : "fp32");
  std::printf("%s\n", conv_engine_description().c_str());
  std::printf("%-24s %5s %8s %8s %8s %8s %6s %6s %8s\n", "layer shape", "count", "fwd ms", "sgemm", "bwd ms", "sgemm",
              "fwd %", "bwd %", "GFLOP/s");
  double tot_f = 0, tot_b = 0, tot_gf = 0, tot_gb = 0, tot_flops = 0;
  for (const ConvShape& s : resnet18_convs(size, stem == "imagenet")) {
    ParamStore store;
    Conv2d conv(store, "conv", s.c, s.oc, s.k, s.stride, s.pad, false, ConvInit::kKaimingNormalFanOut);
    store.finalize();
    conv.init_params(store, 1);
    Tensor x({batch, s.c, s.h, s.h});
    for (size_t i = 0; i < x.numel(); ++i) x[i] = float((i * 7919) % 201) / 100.0f - 1.0f;
    ForwardContext ctx;
    const Tensor& y = conv.forward(x, ctx);
    Tensor dy(y.shape());
    for (size_t i = 0; i < dy.numel(); ++i) dy[i] = float((i * 104729) % 199) / 100.0f - 1.0f;
    GradSink sink;
    auto fwd = [&] { conv.forward(x, ctx); };
    auto bwd = [&] {
      sink.begin({1}, nullptr);
      conv.backward(dy, sink, true);
    };
    GemmRecorder rec_f, rec_b;
    {
      GemmRecordScope scope(rec_f);
      fwd();
    }
    {
      GemmRecordScope scope(rec_b);
      bwd();
    }
    RecordedGemms gemm_f(rec_f), gemm_b(rec_b);
    const auto [tf, gf] = best_alternating(fwd, gemm_f, min_seconds);
    const auto [tb, gb] = best_alternating(bwd, gemm_b, min_seconds);
    const int64_t oh = y.dim(2);
    const double flops = 3.0 * 2.0 * double(batch * s.oc * s.c * s.k * s.k * oh * oh);  // fwd + 2 bwd products
    char name[64];
    std::snprintf(name, sizeof name, "%lld->%lld k%lld/%lld %lldx%lld", (long long)s.c, (long long)s.oc,
                  (long long)s.k, (long long)s.stride, (long long)s.h, (long long)s.h);
    std::printf("%-24s %5d %8.3f %8.3f %8.3f %8.3f %5.0f%% %5.0f%% %8.1f  %s\n", name, s.count, tf * 1e3, gf * 1e3,
                tb * 1e3, gb * 1e3, 100 * gf / tf, 100 * gb / tb, flops / (tf + tb) / 1e9, conv.kernel().c_str());
    tot_f += s.count * tf;
    tot_b += s.count * tb;
    tot_gf += s.count * gf;
    tot_gb += s.count * gb;
    tot_flops += s.count * flops;
  }
  std::printf("%-24s %5s %8.3f %8.3f %8.3f %8.3f %5.0f%% %5.0f%% %8.1f\n", "all convolutions", "", tot_f * 1e3,
              tot_gf * 1e3, tot_b * 1e3, tot_gb * 1e3, 100 * tot_gf / tot_f, 100 * tot_gb / tot_b,
              tot_flops / (tot_f + tot_b) / 1e9);
  return 0;
}
