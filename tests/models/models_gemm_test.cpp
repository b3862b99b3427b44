// The CPU GEMM engines (models/kernels/cpu/gemm_engine.h) against a float64 reference, and against
// each other; DPT_GEMM's values and auto's rule (models/kernels/cpu/gemm_choice.h), its
// per-size pick at one thread included.
//
// Terms:
//   bound   |C - C_ref| <= (k + 3) * FLT_EPSILON * (|alpha| * sum_l |a_il| |b_lj| + |beta c_ij|)
//           per element. A float32 dot product of length k summed in any order (blocked,
//           split over threads, with or without FMA) is within k * u of the exact one
//           relative to sum |a||b| (u = FLT_EPSILON / 2, Higham's gamma_k); the 3 covers
//           alpha applied before or after the sum and the beta * C add. A wrong transpose,
//           leading dimension or alpha is off by O(sum |a||b|), far above it.
//   padding a leading dimension above the row length leaves columns no engine may read
//           (A and B: NaN there, which would reach C) or write (C: a sentinel that must
//           stay).
#include <optional>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "models/kernels/cpu/gemm.h"
#include "tests/models/gemm_test_cases.h"

using namespace dpt;
using namespace dpt::test;

namespace {

// The float64 result and each element's bound.
void reference(const Case& c, const Operands& o, std::vector<double>& ref, std::vector<double>& bound) {
  ref.assign(static_cast<size_t>(c.m) * c.n, 0.0);
  bound.assign(ref.size(), 0.0);
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      double dot = 0, mag = 0;
      for (int l = 0; l < c.k; ++l) {
        const double p = double(at_a(c, o, i, l)) * double(at_b(c, o, l, j));
        dot += p;
        mag += std::fabs(p);
      }
      const double c0 = c.beta == 0.0f ? 0.0 : double(o.c0[static_cast<size_t>(i) * c.ldc() + j]);
      ref[static_cast<size_t>(i) * c.n + j] = double(c.alpha) * dot + double(c.beta) * c0;
      bound[static_cast<size_t>(i) * c.n + j] =
          (c.k + 3) * double(FLT_EPSILON) * (std::fabs(double(c.alpha)) * mag + std::fabs(double(c.beta) * c0));
    }
}

std::vector<float> run(GemmEngine e, const Case& c, const Operands& o) {
  std::vector<float> out = o.c0;
  sgemm_with(e, c.ta, c.tb, c.m, c.n, c.k, c.alpha, o.a.data(), c.lda(), o.b.data(), c.ldb(), c.beta, out.data(),
             c.ldc());
  return out;
}

// Elements out of bound (NaN counts), and padding of C that was written; the first
// failure described after what `what` already says.
int count_errors(const Case& c, const std::vector<float>& got, const std::vector<double>& ref,
                 const std::vector<double>& bound, std::string& what) {
  int bad = 0;
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.ldc(); ++j) {
      const float g = got[static_cast<size_t>(i) * c.ldc() + j];
      bool ok;
      std::ostringstream s;
      if (j >= c.n) {
        ok = std::memcmp(&g, &kSentinel, sizeof g) == 0;
        s << "padding C[" << i << "][" << j << "] = " << g << " was written";
      } else {
        const double r = ref[static_cast<size_t>(i) * c.n + j], b = bound[static_cast<size_t>(i) * c.n + j];
        ok = std::fabs(double(g) - r) <= b;  // false for NaN
        s << "C[" << i << "][" << j << "] = " << g << ", float64 reference " << r << ", error "
          << std::fabs(double(g) - r) << " > bound " << b;
      }
      if (!ok && bad++ == 0) what += s.str();
    }
  return bad;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  // Edge shapes (1s, odd, around kernel block sizes), every transpose pair, beta 0 and 1.
  const int shapes[][3] = {{1, 1, 1},    {1, 7, 5},    {7, 1, 5},     {5, 7, 1},    {1, 1, 300},  {3, 5, 1000},
                           {17, 31, 13}, {16, 16, 16}, {33, 65, 129}, {64, 48, 96}, {127, 1, 63}, {1, 255, 64},
                           {96, 200, 257}};
  std::mt19937 gen(7);
  int i = 0;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (float beta : {0.0f, 1.0f}) {
        Case c;
        c.ta = t & 1, c.tb = t & 2;
        c.m = s[0], c.n = s[1], c.k = s[2];
        c.beta = beta;
        c.alpha = (i % 3 == 0) ? 1.0f : (i % 3 == 1 ? -0.75f : 2.5f);
        c.pad_a = (i % 4 == 1) ? 3 : 0;
        c.pad_b = (i % 4 == 2) ? 5 : 0;
        c.pad_c = (i % 4 == 3) ? 2 : (i % 5 == 0 ? 1 : 0);
        v.push_back(c);
        ++i;
      }
  // Random shapes: sizes 1..160, random padding and scalars.
  std::uniform_int_distribution<int> dim(1, 160), pad(0, 9), bit(0, 1);
  for (int r = 0; r < 48; ++r) {
    Case c;
    c.ta = bit(gen), c.tb = bit(gen);
    c.m = dim(gen), c.n = dim(gen), c.k = dim(gen);
    c.pad_a = pad(gen), c.pad_b = pad(gen), c.pad_c = pad(gen);
    c.alpha = bit(gen) ? 1.0f : std::uniform_real_distribution<float>(-3.0f, 3.0f)(gen);
    c.beta = bit(gen) ? 0.0f : 1.0f;
    v.push_back(c);
  }
  return v;
}

}  // namespace

TEST_CASE("every GEMM engine is within float32's bound of a float64 reference, and of the others", "[gemm]") {
  const auto engines = available_gemm_engines();
  INFO("engines in this build: " << engines.size() << "; sgemm runs " << gemm_engine_description());
  std::mt19937 gen(2024);
  int checked = 0;
  for (const Case& c : cases()) {
    const Operands o = make_operands(c, gen);
    std::vector<double> ref, bound;
    reference(c, o, ref, bound);
    std::vector<std::vector<float>> results;
    for (GemmEngine e : engines) {
      std::string what;
      try {
        results.push_back(run(e, c, o));
      } catch (const std::exception& ex) {  // an engine that rejects valid arguments fails the case
        results.emplace_back(o.c0.size(), std::numeric_limits<float>::quiet_NaN());
        what = std::string("threw: ") + ex.what() + "; ";
      }
      const int bad = count_errors(c, results.back(), ref, bound, what);
      INFO(gemm_engine_name(e) << " " << c.str() << ": " << bad << " bad elements; first: " << what);
      CHECK(bad == 0);
      ++checked;
    }
    // Engine against engine: both within the bound of the reference, so within twice it
    // of each other.
    for (size_t e = 1; e < results.size(); ++e) {
      int bad = 0;
      std::string what;
      for (int i = 0; i < c.m; ++i)
        for (int j = 0; j < c.n; ++j) {
          const double x = results[0][static_cast<size_t>(i) * c.ldc() + j];
          const double y = results[e][static_cast<size_t>(i) * c.ldc() + j];
          const double b = 2 * bound[static_cast<size_t>(i) * c.n + j];
          if (!(std::fabs(x - y) <= b) && bad++ == 0) {
            std::ostringstream s;
            s << "C[" << i << "][" << j << "]: " << x << " vs " << y << " > " << b;
            what = s.str();
          }
        }
      INFO(gemm_engine_name(engines[0]) << " vs " << gemm_engine_name(engines[e]) << " " << c.str() << ": " << what);
      CHECK(bad == 0);
    }
  }
  CHECK(checked == static_cast<int>(cases().size() * engines.size()));
}

TEST_CASE("k = 0 gives beta * C, and beta = 0 never reads C", "[gemm]") {
  for (GemmEngine e : available_gemm_engines()) {
    INFO(gemm_engine_name(e));
    const float a[1] = {1.0f}, b[1] = {1.0f};
    std::vector<float> c = {2.0f, -4.0f, 8.0f, 16.0f};
    sgemm_with(e, false, false, 2, 2, 0, 1.0f, a, 1, b, 2, 0.5f, c.data(), 2);
    CHECK(c == std::vector<float>{1.0f, -2.0f, 4.0f, 8.0f});
    std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
    sgemm_with(e, false, false, 2, 2, 0, 1.0f, a, 1, b, 2, 0.0f, c.data(), 2);
    CHECK(c == std::vector<float>(4, 0.0f));
  }
}

TEST_CASE("the same product gives the same bits at any buffer offset", "[gemm]") {
  // Resumed runs continue bit for bit only if an engine's result does not depend on where
  // its operands happen to lie.
  std::mt19937 gen(5);
  Case c;
  c.tb = true, c.m = 64, c.n = 96, c.k = 200, c.beta = 1.0f;
  const Operands o = make_operands(c, gen);
  for (GemmEngine e : available_gemm_engines()) {
    INFO(gemm_engine_name(e));
    const std::vector<float> base = run(e, c, o);
    for (int shift = 1; shift < 4; ++shift) {
      std::vector<float> a(o.a.size() + shift), b(o.b.size() + shift), out(o.c0.size() + shift);
      std::copy(o.a.begin(), o.a.end(), a.begin() + shift);
      std::copy(o.b.begin(), o.b.end(), b.begin() + shift);
      std::copy(o.c0.begin(), o.c0.end(), out.begin() + shift);
      sgemm_with(e, c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data() + shift, c.lda(), b.data() + shift, c.ldb(), c.beta,
                 out.data() + shift, c.ldc());
      CHECK(std::memcmp(out.data() + shift, base.data(), base.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("oneDNN runs on blas_threads() threads, from any thread, and small products on one", "[gemm]") {
  if (!gemm_engine_available(GemmEngine::onednn)) {
    WARN("no oneDNN in this build");
    return;
  }
  const int saved = blas_threads();
  const int n = 96;  // 96^3 multiply-adds: above the one-thread limit (64^3)
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n, 0.0f);
  for (int t : {1, 2}) {
    set_blas_threads(t);
    INFO("blas_threads() = " << blas_threads());
    sgemm_with(GemmEngine::onednn, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    CHECK(gemm_engine_threads(GemmEngine::onednn) == blas_threads());
    int seen = -1, small = -1;
    std::thread([&] {
      std::vector<float> c2(n * n);
      sgemm_with(GemmEngine::onednn, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c2.data(), n);
      seen = gemm_engine_threads(GemmEngine::onednn);
      sgemm_with(GemmEngine::onednn, false, false, 64, 64, 64, 1.0f, a.data(), n, b.data(), n, 0.0f, c2.data(), n);
      small = gemm_engine_threads(GemmEngine::onednn);
    }).join();
    CHECK(seen == blas_threads());
    CHECK(small == 1);
  }
  set_blas_threads(saved);
  CHECK(c[0] == 0.5f * n);
}

TEST_CASE("mkl, where it loads, is within float32's bound on every transpose at 1 and 2 threads; else refused",
          "[gemm]") {
  const std::vector<GemmEngine> engines = available_gemm_engines();
  const bool listed = std::find(engines.begin(), engines.end(), GemmEngine::mkl) != engines.end();
  CHECK(listed == gemm_engine_available(GemmEngine::mkl));
  if (!gemm_engine_available(GemmEngine::mkl)) {
    const std::string why = gemm_engine_unavailable_reason(GemmEngine::mkl);
    WARN("mkl unavailable (" << why << "): only its refusal checked");
    CHECK_FALSE(why.empty());
    try {
      choose_gemm_engine("mkl");
      FAIL("DPT_GEMM=mkl accepted without MKL");
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.rfind("DPT_GEMM=mkl: ", 0) == 0);
      CHECK(msg.find(why) != std::string::npos);
    }
    CHECK_THROWS_AS(sgemm_with(GemmEngine::mkl, false, false, 1, 1, 1, 1.0f, nullptr, 1, nullptr, 1, 0.0f, nullptr, 1),
                    std::invalid_argument);
    return;
  }
  WARN("mkl loads: " << gemm_engine_label(GemmEngine::mkl) << "; its refusal where absent is not checked here");
  CHECK(gemm_engine_unavailable_reason(GemmEngine::mkl).empty());
  CHECK(choose_gemm_engine("mkl").engine == GemmEngine::mkl);
  CHECK(choose_gemm_engine("mkl").how == "DPT_GEMM=mkl");
  CHECK(gemm_engine_label(GemmEngine::mkl).rfind("mkl 20", 0) == 0);
  // Shapes on both sides of MKL's small-size paths and 64^3, each transpose pair, padded
  // leading dimensions, accumulating and not.
  const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 65, 129}, {64, 64, 64}, {128, 96, 300}, {200, 257, 96}};
  const int saved = blas_threads();
  std::mt19937 gen(55);
  for (int threads : {1, 2}) {
    set_blas_threads(threads);
    for (const auto& sh : shapes)
      for (int t = 0; t < 4; ++t) {
        Case c;
        c.ta = t & 1, c.tb = t & 2;
        c.m = sh[0], c.n = sh[1], c.k = sh[2];
        c.alpha = t == 3 ? -0.75f : 1.0f;
        c.beta = t & 1 ? 1.0f : 0.0f;
        c.pad_a = t == 1 ? 3 : 0, c.pad_b = t == 2 ? 5 : 0, c.pad_c = t == 3 ? 2 : 0;
        const Operands o = make_operands(c, gen);
        std::vector<double> ref, bound;
        reference(c, o, ref, bound);
        std::string what;
        const int bad = count_errors(c, run(GemmEngine::mkl, c, o), ref, bound, what);
        INFO("mkl, " << threads << " thread(s), " << c.str() << ": " << bad << " bad elements; first: " << what);
        CHECK(bad == 0);
      }
  }
  set_blas_threads(saved);
}

TEST_CASE("DPT_GEMM's values and auto's rule", "[gemm]") {
  CHECK(choose_gemm_engine("openblas").engine == GemmEngine::openblas);
  CHECK(choose_gemm_engine("openblas").how == "DPT_GEMM=openblas");
  CHECK_THROWS_AS(choose_gemm_engine("blis"), std::invalid_argument);
  if (gemm_engine_available(GemmEngine::onednn))
    CHECK(choose_gemm_engine("onednn").engine == GemmEngine::onednn);
  else
    CHECK_THROWS_AS(choose_gemm_engine("onednn"), std::invalid_argument);
  // auto without the variable: an available engine, and the reason.
  const GemmChoice automatic = choose_gemm_engine("auto");
  CHECK(gemm_engine_available(automatic.engine));
  CHECK(automatic.how.rfind("auto: ", 0) == 0);
  CHECK(choose_gemm_engine("").engine == automatic.engine);

  // OpenBLAS's core names and oneDNN's ISAs to levels.
  CHECK(openblas_core_level("Prescott") == SimdLevel::sse);
  CHECK(openblas_core_level("Nehalem") == SimdLevel::sse);
  CHECK(openblas_core_level("Sandybridge") == SimdLevel::avx);
  CHECK(openblas_core_level("Haswell") == SimdLevel::avx2);
  CHECK(openblas_core_level("Zen") == SimdLevel::avx2);
  CHECK(openblas_core_level("SkylakeX") == SimdLevel::avx512);
  CHECK(openblas_core_level("cooperlake") == SimdLevel::avx512);
  CHECK(openblas_core_level("GraniteRapids") == SimdLevel::unknown);
  CHECK(openblas_core_level(openblas_core_name()) != SimdLevel::unknown);  // this OpenBLAS's own core
  CHECK(onednn_isa_level(0x1) == SimdLevel::sse);        // sse41
  CHECK(onednn_isa_level(0x3) == SimdLevel::avx);        // avx
  CHECK(onednn_isa_level(0x7) == SimdLevel::avx2);       // avx2
  CHECK(onednn_isa_level(0x407) == SimdLevel::avx2);     // avx2_vnni
  CHECK(onednn_isa_level(0x27) == SimdLevel::avx512);    // avx512_core
  CHECK(onednn_isa_level(0x3e7) == SimdLevel::avx512);   // avx512_core_amx
  CHECK(onednn_isa_level(-1) == SimdLevel::unknown);     // no oneDNN

  // The rule: the lower level loses, a tie keeps openblas, unknown measures.
  CHECK(choose_gemm_engine_by_level(SimdLevel::sse, SimdLevel::avx512) == GemmEngine::onednn);
  CHECK(choose_gemm_engine_by_level(SimdLevel::avx2, SimdLevel::avx512) == GemmEngine::onednn);
  CHECK(choose_gemm_engine_by_level(SimdLevel::avx512, SimdLevel::avx512) == GemmEngine::openblas);
  CHECK(choose_gemm_engine_by_level(SimdLevel::avx512, SimdLevel::avx2) == GemmEngine::openblas);
  CHECK_FALSE(choose_gemm_engine_by_level(SimdLevel::unknown, SimdLevel::avx512).has_value());
  CHECK_FALSE(choose_gemm_engine_by_level(SimdLevel::avx2, SimdLevel::unknown).has_value());
  // Rule 2b (by size at one thread) only on one level: on two the lower engine loses at
  // every size, so the higher one runs them all.
  CHECK(gemm_by_size_on_levels(SimdLevel::avx512, SimdLevel::avx512));
  CHECK(gemm_by_size_on_levels(SimdLevel::sse, SimdLevel::sse));
  CHECK_FALSE(gemm_by_size_on_levels(SimdLevel::avx512, SimdLevel::avx2));
  CHECK_FALSE(gemm_by_size_on_levels(SimdLevel::avx2, SimdLevel::avx512));
  CHECK_FALSE(gemm_by_size_on_levels(SimdLevel::unknown, SimdLevel::unknown));
}

TEST_CASE("auto's measurement (for OpenBLAS cores it does not know) is quick and leaves the threads", "[gemm]") {
  if (!gemm_engine_available(GemmEngine::onednn)) {
    CHECK(measure_onednn_speedup() == 0.0);
    return;
  }
  const int threads = blas_threads();
  const auto t0 = std::chrono::steady_clock::now();
  const double speedup = measure_onednn_speedup();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("measure_onednn_speedup: onednn " << speedup << "x openblas (" << openblas_core_name() << "), " << seconds
                                         << " s");
  CHECK(speedup > 0.0);
  CHECK(seconds < 3.0);  // ~0.05-0.15 s alone; generous for a loaded machine
  CHECK(blas_threads() == threads);
}

TEST_CASE("sgemm records, runs the chosen engine, and the replay uses it too", "[gemm]") {
  const std::string description = gemm_engine_description();
  INFO(description);
  std::mt19937 gen(3);
  Case c;
  c.ta = true, c.m = 20, c.n = 30, c.k = 40;
  CHECK(description.find(gemm_engine_name(gemm_engine_for(c.m, c.n, c.k))) != std::string::npos);
  const Operands o = make_operands(c, gen);
  GemmRecorder rec;
  std::vector<float> out = o.c0;
  {
    GemmRecordScope scope(rec);
    sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, o.a.data(), c.lda(), o.b.data(), c.ldb(), c.beta, out.data(), c.ldc());
  }
  REQUIRE(rec.calls().size() == 1);
  CHECK(rec.calls().begin()->first.m == 20);
  CHECK(rec.total_flops() == 2.0 * 20 * 30 * 40);
  const std::vector<float> direct = run(gemm_engine_for(c.m, c.n, c.k), c, o);
  CHECK(std::memcmp(out.data(), direct.data(), out.size() * sizeof(float)) == 0);
  GemmReplay replay(rec);
  CHECK(!replay.engine());  // each call where sgemm() runs it
  CHECK(replay.run_round() >= 0.0);
  CHECK(GemmReplay(rec, GemmEngine::openblas).engine() == GemmEngine::openblas);
}

TEST_CASE("auto's rule by size: the thresholds, and where it is on", "[gemm]") {
  CHECK(gemm_engine_by_size(128, 128, 32) == GemmEngine::openblas);  // 2^19
  CHECK(gemm_engine_by_size(128, 128, 63) == GemmEngine::openblas);
  CHECK(gemm_engine_by_size(64, 128, 128) == GemmEngine::onednn);    // 2^20
  CHECK(gemm_engine_by_size(2048, 128, 4) == GemmEngine::onednn);    // 2^20: the product, not each side
  CHECK(gemm_engine_by_size(1023, 1024, 1) == GemmEngine::openblas);
  CHECK(gemm_engine_by_size(64, 32, 64) == GemmEngine::openblas);    // an attention head's product
  const GemmChoice automatic = choose_gemm_engine("auto");
  INFO(automatic.how);
  // The rule is on exactly where auto keeps openblas for two engines on one level.
  CHECK(automatic.by_size_at_one_thread ==
        (gemm_engine_available(GemmEngine::onednn) && automatic.engine == GemmEngine::openblas &&
         automatic.how.find("are both") != std::string::npos));
  CHECK_FALSE(choose_gemm_engine("openblas").by_size_at_one_thread);
  if (gemm_engine_available(GemmEngine::onednn)) CHECK_FALSE(choose_gemm_engine("onednn").by_size_at_one_thread);
  // Where it is off (DPT_GEMM pinned, or another rule chose), one engine at every size and
  // thread count; where it is on, [gemm_by_size] routes (models_gemm.by_size).
  const char* env = std::getenv("DPT_GEMM");
  if (choose_gemm_engine(env ? env : "").by_size_at_one_thread) return;
  for (int t : {1, 2}) {
    const int saved = blas_threads();
    set_blas_threads(t);
    CHECK(gemm_engine_for(256, 256, 256) == gemm_engine());
    CHECK(gemm_engine_for(16, 16, 16) == gemm_engine());
    set_blas_threads(saved);
  }
}

// Started through `cpu_has gemm_by_size` (models_gemm.by_size): Skipped, with the reason,
// where the rule is off; run directly there, it fails.
TEST_CASE("auto at one thread: each product on the engine its size wins on, the same bits as that engine",
          "[gemm_by_size]") {
  const char* env = std::getenv("DPT_GEMM");
  const GemmChoice choice = choose_gemm_engine(env ? env : "");
  INFO(choice.how);
  REQUIRE(choice.by_size_at_one_thread);
  const int saved = blas_threads();
  std::mt19937 gen(11);
  auto through_sgemm = [](const Case& c, const Operands& o) {
    std::vector<float> out = o.c0;
    sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, o.a.data(), c.lda(), o.b.data(), c.ldb(), c.beta, out.data(), c.ldc());
    return out;
  };
  auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  set_blas_threads(1);
  // Equal bits name the engine that ran only on a product the two engines round
  // differently; which products those are depends on the CPU's kernels (on an AMX Xeon
  // both round 96x128x96 alike), so each side tries shapes until one tells them apart.
  auto telling_case = [&](bool large) {
    const int ks[] = {96, 100, 160, 257, 333};
    for (int k : ks) {
      Case c;
      if (large) c.m = 96, c.n = 128, c.k = k * 4 / 3 + 1;  // m*n*k >= 2^20
      else c.tb = true, c.m = 64, c.n = 64, c.k = k / 3;
      const Operands o = make_operands(c, gen);
      if (!same_bits(run(GemmEngine::onednn, c, o), run(GemmEngine::openblas, c, o)))
        return std::optional<std::pair<Case, Operands>>(std::make_pair(c, o));
    }
    return std::optional<std::pair<Case, Operands>>();
  };
  CHECK(gemm_engine_for(96, 128, 129) == GemmEngine::onednn);
  CHECK(gemm_engine_for(64, 64, 32) == GemmEngine::openblas);
  CHECK(gemm_engine_description().find("on products of m*n*k >= 2^20") != std::string::npos);
  const auto big = telling_case(true), small = telling_case(false);
  if (big) {
    CHECK(gemm_engine_for(big->first.m, big->first.n, big->first.k) == GemmEngine::onednn);
    CHECK(same_bits(through_sgemm(big->first, big->second), run(GemmEngine::onednn, big->first, big->second)));
  } else {
    WARN("no large product the two engines round differently on this CPU: its route checked by the rule only");
  }
  if (small) {
    CHECK(gemm_engine_for(small->first.m, small->first.n, small->first.k) == GemmEngine::openblas);
    CHECK(same_bits(through_sgemm(small->first, small->second), run(GemmEngine::openblas, small->first, small->second)));
  } else {
    WARN("no small product the two engines round differently on this CPU: its route checked by the rule only");
  }
  REQUIRE((big || small));  // at least one side's route seen in the bits
  // With two threads, one engine for all (the two libraries' pools would spin against each other).
  set_blas_threads(2);
  CHECK(gemm_engine_for(96, 128, 129) == gemm_engine());
  CHECK(gemm_engine_for(64, 64, 32) == gemm_engine());
  CHECK(gemm_engine_description().rfind(gemm_engine_label(gemm_engine()) + ", 2 threads", 0) == 0);
  set_blas_threads(saved);
}
