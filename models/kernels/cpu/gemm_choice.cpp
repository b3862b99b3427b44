#include "models/kernels/cpu/gemm_choice.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <utility>
#include <vector>

#include "models/kernels/cpu/gemm.h"

namespace dpt {

double measure_onednn_speedup() {
  if (!gemm_engine_available(GemmEngine::onednn)) return 0.0;
  struct Shape {
    bool ta, tb;
    int m, n, k;
  };
  const Shape shapes[] = {{false, false, 256, 768, 768}, {false, true, 256, 768, 768}, {true, false, 768, 768, 256}};
  std::vector<float> a(768 * 768, 0.01f), b(768 * 768, 0.02f), c(768 * 768, 0.0f);
  const int threads = blas_threads();
  set_blas_threads(1);
  const GemmEngine engines[] = {GemmEngine::openblas, GemmEngine::onednn};
  double best[2][3] = {};
  for (int round = 0; round < 4; ++round)  // round 0: warm-up (thread start, oneDNN's JIT)
    for (int s = 0; s < 3; ++s)
      for (int e = 0; e < 2; ++e) {
        const Shape& sh = shapes[s];
        const auto t0 = std::chrono::steady_clock::now();
        sgemm_with(engines[e], sh.ta, sh.tb, sh.m, sh.n, sh.k, 1.0f, a.data(), sh.ta ? sh.m : sh.k, b.data(),
                   sh.tb ? sh.k : sh.n, 0.0f, c.data(), sh.n);
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (round > 0 && (best[e][s] == 0 || t < best[e][s])) best[e][s] = t;
      }
  set_blas_threads(threads);
  double t_openblas = 0, t_onednn = 0;
  for (int s = 0; s < 3; ++s) t_openblas += best[0][s], t_onednn += best[1][s];
  return t_onednn > 0 ? t_openblas / t_onednn : 0.0;
}

namespace {

GemmChoice choose_auto() {
  if (!gemm_engine_available(GemmEngine::onednn))
    return {GemmEngine::openblas, false, "auto: no oneDNN in this build"};
  const std::string core = openblas_core_name();
  const SimdLevel ob = openblas_core_level(core), od = onednn_isa_level(onednn_cpu_isa());
  const std::string cpu = simd_level_name(cpu_features().fp32_level());
  if (auto by_level = choose_gemm_engine_by_level(ob, od)) {
    const std::string obs = "openblas core " + core, ods = "onednn " + onednn_isa_name();
    if (gemm_by_size_on_levels(ob, od))
      return {GemmEngine::openblas, true,
              "auto: " + obs + " and " + ods + " are both " + simd_level_name(ob) +
                  ": openblas, at 1 thread onednn on products of m*n*k >= 2^20 (cpu: " + cpu + ")"};
    return {*by_level, false,
            "auto: " + obs + " is " + simd_level_name(ob) + ", " + ods + " is " + simd_level_name(od) + " (cpu: " +
                cpu + ")"};
  }
  const double speedup = measure_onednn_speedup();
  char buf[200];
  std::snprintf(buf, sizeof buf, "auto: openblas core '%s' not in the list; measured onednn %.2fx openblas on "
                "256x768x768 products, 1 thread (margin %.2fx)", core.c_str(), speedup, kMeasuredMargin);
  return {speedup >= kMeasuredMargin ? GemmEngine::onednn : GemmEngine::openblas, false, buf};
}

const GemmChoice& resolved_choice() {
  static const GemmChoice choice = [] {
    const char* env = std::getenv("DPT_GEMM");
    return choose_gemm_engine(env ? env : "");
  }();
  return choice;
}

}  // namespace

SimdLevel openblas_core_level(std::string_view core) {
  // Every x86-64 core of OpenBLAS 0.3.x's DYNAMIC_ARCH build (driver/others/dynamic.c),
  // by the widest fp32 arithmetic of its sgemm kernel. 128-bit ones are all "sse".
  static const std::pair<const char*, SimdLevel> kCores[] = {
      {"Unknown", SimdLevel::sse},       {"Katmai", SimdLevel::sse},      {"Coppermine", SimdLevel::sse},
      {"Northwood", SimdLevel::sse},     {"Banias", SimdLevel::sse},      {"Prescott", SimdLevel::sse},
      {"Atom", SimdLevel::sse},          {"Core2", SimdLevel::sse},       {"Penryn", SimdLevel::sse},
      {"Dunnington", SimdLevel::sse},    {"Nehalem", SimdLevel::sse},     {"Athlon", SimdLevel::sse},
      {"Opteron", SimdLevel::sse},       {"Opteron_SSE3", SimdLevel::sse}, {"Barcelona", SimdLevel::sse},
      {"Nano", SimdLevel::sse},          {"Bobcat", SimdLevel::sse},      {"Sandybridge", SimdLevel::avx},
      {"Bulldozer", SimdLevel::avx},     {"Piledriver", SimdLevel::avx},  {"Steamroller", SimdLevel::avx},
      {"Excavator", SimdLevel::avx},     {"Haswell", SimdLevel::avx2},    {"Zen", SimdLevel::avx2},
      {"SkylakeX", SimdLevel::avx512},   {"Cooperlake", SimdLevel::avx512},
      {"SapphireRapids", SimdLevel::avx512}};
  for (const auto& [name, level] : kCores) {
    const std::string_view n(name);
    if (n.size() == core.size() && std::equal(n.begin(), n.end(), core.begin(), [](char x, char y) {
          return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
        }))
      return level;
  }
  return SimdLevel::unknown;
}

SimdLevel onednn_isa_level(int isa) {
  if (isa <= 0) return SimdLevel::unknown;  // absent, or "all" (no ISA named)
  // dnnl_cpu_isa_t: sse41 0x1, avx 0x3, avx2 0x7, avx512_core 0x27 and its extensions
  // (vnni 0x67, bf16 0xe7, amx 0x3e7), avx2_vnni 0x407. avx512_mic (0xf, Xeon Phi) counts
  // as avx2: oneDNN's sgemm has no kernels for it.
  const unsigned u = static_cast<unsigned>(isa);
  if ((u & 0x27) == 0x27) return SimdLevel::avx512;
  if ((u & 0x7) == 0x7) return SimdLevel::avx2;
  if ((u & 0x3) == 0x3) return SimdLevel::avx;
  return SimdLevel::sse;
}

std::optional<GemmEngine> choose_gemm_engine_by_level(SimdLevel openblas, SimdLevel onednn) {
  if (openblas == SimdLevel::unknown || onednn == SimdLevel::unknown) return std::nullopt;
  return onednn > openblas ? GemmEngine::onednn : GemmEngine::openblas;
}

bool gemm_by_size_on_levels(SimdLevel openblas, SimdLevel onednn) {
  return openblas != SimdLevel::unknown && openblas == onednn;
}

GemmChoice choose_gemm_engine(std::string_view dpt_gemm) {
  if (dpt_gemm.empty() || dpt_gemm == "auto") return choose_auto();
  const auto e = parse_gemm_engine(dpt_gemm);
  if (!e)
    throw std::invalid_argument("DPT_GEMM=" + std::string(dpt_gemm) + ": expected openblas, onednn, mkl or auto");
  if (!gemm_engine_available(*e))
    throw std::invalid_argument("DPT_GEMM=" + std::string(dpt_gemm) + ": engine unavailable: " +
                                gemm_engine_unavailable_reason(*e));
  return {*e, false, "DPT_GEMM=" + std::string(dpt_gemm)};
}

GemmEngine gemm_engine() { return resolved_choice().engine; }

GemmEngine gemm_engine_by_size(int64_t m, int64_t n, int64_t k) {
  return m * n * k >= kOnednnMinProduct ? GemmEngine::onednn : GemmEngine::openblas;
}

namespace {
// oneDNN's OpenMP team follows blas_threads() on every call (gemm_engine.cpp), so
// OpenBLAS's count is both engines'.
bool products_on_one_thread() { return blas_threads() == 1; }
}  // namespace

GemmEngine gemm_engine_for(int m, int n, int k) {
  const GemmChoice& c = resolved_choice();
  if (c.by_size_at_one_thread && products_on_one_thread()) return gemm_engine_by_size(m, n, k);
  return c.engine;
}

std::string gemm_engine_label(GemmEngine e) {
  if (e == GemmEngine::mkl) {  // "... Library Version 2026.2-Product Build 20260915 for ...": "mkl 2026.2"
    const std::string v = mkl_version();
    const size_t at = v.find("Version ");
    return "mkl " + (at == std::string::npos ? v : v.substr(at + 8, v.find_first_of("- ", at + 8) - (at + 8)));
  }
  if (e == GemmEngine::onednn)
    return "onednn " + onednn_version() + " " + onednn_isa_name() + " (" +
           simd_level_name(onednn_isa_level(onednn_cpu_isa())) + ")";
  const std::string core = openblas_core_name();
  return "openblas " + core + " (" + simd_level_name(openblas_core_level(core)) + ")";
}

std::string gemm_engine_description() {
  const GemmChoice& c = resolved_choice();
  const int threads = blas_threads();
  const std::string what = c.by_size_at_one_thread && products_on_one_thread()
                               ? gemm_engine_label(GemmEngine::onednn) + " on products of m*n*k >= 2^20, " +
                                     gemm_engine_label(GemmEngine::openblas) + " below"
                               : gemm_engine_label(c.engine);
  return what + ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " [" + c.how + "]";
}

}  // namespace dpt
