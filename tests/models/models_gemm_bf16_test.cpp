// gemm_bf16 and GemmPrecision::bf16 (models/kernels/cpu/gemm.h): bf16 operands, fp32 accumulation.
//
// Terms:
//   rounded operands  A and B each rounded to bf16 (nearest even), widened back.
//   exact bound       |C - C_ref| <= (k + 3) * FLT_EPSILON * (|alpha| sum |ra||rb| + |beta c|)
//                     against the float64 product of the rounded operands: the products of
//                     two bf16 values are exact in fp32, so only the fp32 sums (any order,
//                     Higham's gamma_k, with a factor 2 to spare) separate the two.
//   fp32 bound        against float64 on the unrounded operands: each operand's rounding is
//                     a relative 2^-8 at most (8 significant bits: half an ulp is 2^-8 of a
//                     value at the bottom of its binade), so each product is off by at most
//                     (2^-8 + 2^-8 + 2^-16) |a||b|: (2^-7 + 2^-16) sum |a||b| plus the exact
//                     bound.
//   padding           as in models_gemm_test.cpp: NaN in A's and B's pads (must not be
//                     read), a sentinel in C's (must not be written); beta == 0 starts C
//                     as NaN (must not be read).
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "models/kernels/cpu/bf16.h"
#include "models/kernels/cpu/gemm.h"
#include "tests/models/gemm_test_cases.h"
#include "models/zoo/models.h"

using namespace dpt;
using namespace dpt::test;

namespace {


float bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

// float64 reference on the rounded operands (`rounded`) or the originals, with the bound
// for each element: the exact bound, plus the operands' rounding when not `rounded`.
void reference(const Case& c, const Operands& o, bool rounded, std::vector<double>& ref, std::vector<double>& bound) {
  ref.assign(static_cast<size_t>(c.m) * c.n, 0.0);
  bound.assign(ref.size(), 0.0);
  auto r = [&](float x) { return rounded ? bf16_round(x) : x; };
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      double dot = 0, mag = 0;
      for (int l = 0; l < c.k; ++l) {
        const double p = double(r(at_a(c, o, i, l))) * double(r(at_b(c, o, l, j)));
        dot += p;
        mag += std::fabs(p);
      }
      const double c0 = c.beta == 0.0f ? 0.0 : double(o.c0[static_cast<size_t>(i) * c.ldc() + j]);
      const size_t e = static_cast<size_t>(i) * c.n + j;
      ref[e] = double(c.alpha) * dot + double(c.beta) * c0;
      const double am = std::fabs(double(c.alpha)) * mag;
      bound[e] = (c.k + 3) * double(FLT_EPSILON) * (am + std::fabs(double(c.beta) * c0)) +
                 (rounded ? 0.0 : (std::ldexp(1.0, -7) + std::ldexp(1.0, -16)) * am);
    }
}

std::vector<float> run_bf16(const Case& c, const Operands& o) {
  std::vector<float> out = o.c0;
  gemm_bf16(c.ta, c.tb, c.m, c.n, c.k, c.alpha, o.a.data(), c.lda(), o.b.data(), c.ldb(), c.beta, out.data(),
            c.ldc());
  return out;
}

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
        ok = std::fabs(double(g) - r) <= b;
        s << "C[" << i << "][" << j << "] = " << g << ", float64 reference " << r << ", error "
          << std::fabs(double(g) - r) << " > bound " << b;
      }
      if (!ok && bad++ == 0) what += s.str();
    }
  return bad;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  const int shapes[][3] = {{1, 1, 1},   {1, 7, 5},    {7, 1, 5},    {5, 7, 1},     {3, 5, 1000},
                           {17, 31, 13}, {16, 16, 16}, {64, 64, 64}, {33, 65, 129}, {96, 200, 257}};
  int i = 0;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (float beta : {0.0f, 1.0f}) {
        Case c;
        c.ta = t & 1, c.tb = t & 2;
        c.m = s[0], c.n = s[1], c.k = s[2];
        c.beta = beta;
        c.alpha = (i % 3 == 0) ? 1.0f : (i % 3 == 1 ? 0.125f : -0.75f);
        c.pad_a = (i % 4 == 1) ? 3 : 0;
        c.pad_b = (i % 4 == 2) ? 5 : 0;
        c.pad_c = (i % 4 == 3) ? 2 : (i % 5 == 0 ? 1 : 0);
        v.push_back(c);
        ++i;
      }
  return v;
}

}  // namespace

TEST_CASE("gemm_bf16 is the fp32-accumulated product of the bf16-rounded operands", "[gemm_bf16]") {
  INFO(bf16_gemm_description());
  std::mt19937 gen(11);
  int checked = 0;
  double max_gap_over_fp32_bound = 0;  // how far from fp32 the results are: bf16 really ran
  for (const Case& c : cases()) {
    const Operands o = make_operands(c, gen);
    const std::vector<float> got = run_bf16(c, o);
    std::vector<double> ref, bound;
    std::string what = c.str() + ": ";
    reference(c, o, true, ref, bound);
    const int bad = count_errors(c, got, ref, bound, what);
    INFO(what);
    CHECK(bad == 0);
    // Against the unrounded operands: within the operands' rounding.
    std::vector<double> ref32, bound32;
    std::string what32 = c.str() + " vs fp32 operands: ";
    reference(c, o, false, ref32, bound32);
    const int bad32 = count_errors(c, got, ref32, bound32, what32);
    INFO(what32);
    CHECK(bad32 == 0);
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) {
        const size_t e = static_cast<size_t>(i) * c.n + j;
        const double fp32_bound = (c.k + 3) * double(FLT_EPSILON) * (bound32[e] - bound[e]) / std::ldexp(1.0, -7);
        if (fp32_bound > 0)
          max_gap_over_fp32_bound = std::max(
              max_gap_over_fp32_bound, std::fabs(double(got[static_cast<size_t>(i) * c.ldc() + j]) - ref32[e]) / fp32_bound);
      }
    ++checked;
  }
  CHECK(checked == 80);
  // An fp32 product would stay within fp32's bound of the unrounded reference; bf16
  // operands leave it far behind somewhere (k up to 1000 of values in [-1, 1]).
  CHECK(max_gap_over_fp32_bound > 10.0);
}

TEST_CASE("gemm_bf16_operands on converted operands equals gemm_bf16 bit for bit; sgemm_bf16_operands records it",
          "[gemm_bf16]") {
  // Same primitive on the same bf16 values natively; elsewhere the same fp32 product of the
  // rounded operands (gemm_bf16's emulation).
  INFO(bf16_gemm_description());
  std::mt19937 gen(17);
  int checked = 0;
  for (const Case& c : cases()) {
    const Operands o = make_operands(c, gen);
    const std::vector<float> want = run_bf16(c, o);
    // The operands dense in their stored layout, converted once (models/kernels/cpu/bf16.h).
    const int ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k, br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
    std::vector<uint16_t> a16(size_t(ar) * ac), b16(size_t(br) * bc);
    for (int r = 0; r < ar; ++r) to_bf16(o.a.data() + size_t(r) * c.lda(), a16.data() + size_t(r) * ac, ac);
    for (int r = 0; r < br; ++r) to_bf16(o.b.data() + size_t(r) * c.ldb(), b16.data() + size_t(r) * bc, bc);
    std::vector<float> got = o.c0;
    GemmRecorder rec;
    {
      const GemmRecordScope scope(rec);
      sgemm_bf16_operands(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a16.data(), b16.data(), c.beta, got.data(), c.ldc());
    }
    INFO(c.str());
    // Bits, with NaN's payload ignored (padding sentinels compare as bits too).
    bool same = true;
    for (size_t i = 0; i < got.size(); ++i)
      same = same && (std::memcmp(&got[i], &want[i], sizeof(float)) == 0 || (std::isnan(got[i]) && std::isnan(want[i])));
    CHECK(same);
    REQUIRE(rec.calls().size() == 1);
    const GemmShape& s = rec.calls().begin()->first;
    CHECK((s.m == c.m && s.n == c.n && s.k == c.k && s.lda == ac && s.ldb == bc && s.ldc == c.ldc()));
    CHECK(s.bf16 == bf16_gemm_native());
    CHECK(s.accumulate == (c.beta != 0.0f));
    ++checked;
  }
  CHECK(checked == 80);
}

TEST_CASE("to_bf16 rounds to nearest even as bf16_bits does, NaN stays NaN, at every length", "[gemm_bf16]") {
  std::mt19937 gen(23);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  for (int n : {0, 1, 5, 15, 16, 17, 31, 32, 33, 100}) {
    std::vector<float> x(size_t(n) + 1);
    for (float& v : x) v = d(gen);
    if (n > 3) x[3] = std::numeric_limits<float>::quiet_NaN(), x[2] = std::numeric_limits<float>::infinity();
    if (n > 1) x[1] = 1.0f + std::ldexp(1.0f, -8);  // a tie: rounds to even (1.0)
    std::vector<uint16_t> got(x.size(), 0xBEEF);
    to_bf16(x.data(), got.data(), n);
    for (int i = 0; i < n; ++i) {
      INFO("n " << n << " i " << i << " x " << x[size_t(i)]);
      if (std::isnan(x[size_t(i)])) CHECK(std::isnan(bf16_value(got[size_t(i)])));
      else CHECK(got[size_t(i)] == bf16_bits(x[size_t(i)]));
    }
    CHECK(got[size_t(n)] == 0xBEEF);  // nothing past n written
  }
  CHECK(bf16_bits(1.0f + std::ldexp(1.0f, -8)) == bf16_bits(1.0f));
}

TEST_CASE("gemm_bf16: k = 0 gives beta * C, m or n = 0 nothing; a short leading dimension is refused", "[gemm_bf16]") {
  std::vector<float> c{1.0f, 2.0f, 3.0f, 4.0f};
  const float a = 5.0f, b = 6.0f;
  gemm_bf16(false, false, 2, 2, 0, 1.0f, &a, 1, &b, 2, 1.0f, c.data(), 2);
  CHECK(c == std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
  gemm_bf16(false, false, 2, 2, 0, 1.0f, &a, 1, &b, 2, 0.0f, c.data(), 2);
  CHECK(c == std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f});
  gemm_bf16(false, false, 0, 2, 3, 1.0f, &a, 3, &b, 2, 0.0f, c.data(), 2);
  std::vector<float> aa(6, 1.0f), bb(6, 1.0f);
  CHECK_THROWS_AS(gemm_bf16(false, false, 2, 2, 3, 1.0f, aa.data(), 2, bb.data(), 2, 0.0f, c.data(), 2),
                  std::invalid_argument);
}

TEST_CASE("gemm_bf16 runs from other threads, each with its own primitives", "[gemm_bf16]") {
  Case c;
  c.m = 48, c.n = 40, c.k = 72, c.beta = 1.0f, c.tb = true;
  std::mt19937 gen(3);
  const Operands o = make_operands(c, gen);
  const std::vector<float> here = run_bf16(c, o);
  std::vector<float> there;
  std::thread t([&] { there = run_bf16(c, o); });
  t.join();
  CHECK(std::memcmp(here.data(), there.data(), here.size() * sizeof(float)) == 0);
}

TEST_CASE("sgemm under GemmPrecision::bf16 runs gemm_bf16 where native, fp32 elsewhere, and records which", "[gemm_bf16]") {
  const std::string d = bf16_gemm_description();
  INFO(d);
  CHECK(d.rfind(bf16_gemm_native() ? "bf16 GEMM: native, oneDNN" : "bf16 GEMM: not native (", 0) == 0);
  Case c;
  c.m = 64, c.n = 96, c.k = 200, c.ta = true;
  std::mt19937 gen(5);
  const Operands o = make_operands(c, gen);
  std::vector<float> expect = o.c0, got = o.c0, fp32 = o.c0;
  if (bf16_gemm_native()) {
    gemm_bf16(c.ta, c.tb, c.m, c.n, c.k, 1.0f, o.a.data(), c.lda(), o.b.data(), c.ldb(), 0.0f, expect.data(), c.ldc());
    CHECK(!gemm_bf16_impl(c.ta, c.tb, c.m, c.n, c.k, c.ldc(), 1.0f, 0.0f).empty());
  } else {
    sgemm_with(gemm_engine(), c.ta, c.tb, c.m, c.n, c.k, 1.0f, o.a.data(), c.lda(), o.b.data(), c.ldb(), 0.0f,
               expect.data(), c.ldc());
  }
  GemmRecorder rec;
  {
    const GemmRecordScope record(rec);
    CHECK(gemm_precision() == GemmPrecision::f32);
    sgemm(c.ta, c.tb, c.m, c.n, c.k, 1.0f, o.a.data(), c.lda(), o.b.data(), c.ldb(), 0.0f, fp32.data(), c.ldc());
    const GemmPrecisionScope bf16(GemmPrecision::bf16);
    CHECK(gemm_precision() == GemmPrecision::bf16);
    sgemm(c.ta, c.tb, c.m, c.n, c.k, 1.0f, o.a.data(), c.lda(), o.b.data(), c.ldb(), 0.0f, got.data(), c.ldc());
  }
  CHECK(gemm_precision() == GemmPrecision::f32);
  CHECK(std::memcmp(got.data(), expect.data(), got.size() * sizeof(float)) == 0);
  REQUIRE(rec.calls().size() == (bf16_gemm_native() ? 2u : 1u));
  int bf16_calls = 0;
  for (const auto& [shape, count] : rec.calls()) bf16_calls += shape.bf16 ? int(count) : 0;
  CHECK(bf16_calls == (bf16_gemm_native() ? 1 : 0));
  GemmReplay replay(rec);
  CHECK(replay.run_round() > 0);
}

TEST_CASE("Module::set_gemm_precision(bf16) runs the model's products in bf16, near fp32", "[gemm_bf16]") {
  ModelConfig cfg;
  cfg.seed = 1;
  auto model = make_model("mlp", cfg);
  const int64_t n = 16;
  const auto& shape = model->sample_shape();
  int64_t per = 1;
  for (int64_t s : shape) per *= s;
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * per));
  for (float& v : x) v = u(gen);
  ModelInput in;
  in.x = x.data();
  in.n = n;
  in.sample_shape = shape;
  auto forward = [&](GemmPrecision p, GemmRecorder& rec) {
    model->set_gemm_precision(p);
    const GemmRecordScope record(rec);
    const Tensor& y = model->forward(in, false);
    return std::vector<float>(y.data(), y.data() + y.numel());
  };
  GemmRecorder r32, r16;
  const std::vector<float> y32 = forward(GemmPrecision::f32, r32);
  const std::vector<float> y16 = forward(GemmPrecision::bf16, r16);
  CHECK(model->gemm_precision() == GemmPrecision::bf16);
  CHECK(gemm_precision() == GemmPrecision::f32);  // the scope ended with forward
  REQUIRE(!r16.calls().empty());
  for (const auto& [shape16, count] : r16.calls()) CHECK(shape16.bf16 == bf16_gemm_native());
  double diff = 0, mag = 0;
  for (size_t i = 0; i < y32.size(); ++i) {
    diff = std::max(diff, double(std::fabs(y32[i] - y16[i])));
    mag = std::max(mag, double(std::fabs(y32[i])));
  }
  INFO("max |y_bf16 - y_fp32| " << diff << " of max |y| " << mag);
  CHECK(diff <= 0.05 * mag);
  if (bf16_gemm_native()) CHECK(diff > 0);
  else CHECK(diff == 0);
}

// Attention's layouts (models/nn/layers/attention.cpp): H heads' operands interleaved in the
// rows of one q|k|v matrix (member h at column h*hd), C either one T x T block per head
// or interleaved the same way. Every member must be the bf16 product of its own operands
// (the exact bound of the float64 reference on the rounded operands), and what lies
// between C's members must stay untouched.
TEST_CASE("gemm_bf16_batched: strided members, one call, each the bf16 product of its own operands",
          "[gemm_bf16]") {
  INFO(bf16_gemm_description());
  std::mt19937 gen(17);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int H = 3, T = 20, hd = 8;
  auto at = [&](const float* base, int ldx, bool trans, int i, int l) {
    return trans ? base[size_t(l) * ldx + i] : base[size_t(i) * ldx + l];
  };
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    for (float beta : {0.0f, 0.5f}) {
      // Blocked C: member h is T x T at h*(T*T + 7), 7 sentinels between blocks (the
      // scores, m = n = T, k = hd). Interleaved C: member h is T x hd at column h*hd of a
      // T x (H*hd + 3) matrix (the output, m = T, n = hd, k = T).
      for (bool interleaved : {false, true}) {
        const int m = T, n = interleaved ? hd : T, kk = interleaved ? T : hd;
        // Stored operands side by side (member h at column h*cols), NaN in the pads past them.
        const int a_rows = ta ? kk : m, a_cols = ta ? m : kk, b_rows = tb ? n : kk, b_cols = tb ? kk : n;
        const int lda = a_cols * H + 2, ldb = b_cols * H + 1;
        std::vector<float> A(size_t(a_rows) * lda, std::numeric_limits<float>::quiet_NaN()),
            B(size_t(b_rows) * ldb, std::numeric_limits<float>::quiet_NaN());
        for (int r = 0; r < a_rows; ++r)
          for (int c = 0; c < a_cols * H; ++c) A[size_t(r) * lda + c] = u(gen);
        for (int r = 0; r < b_rows; ++r)
          for (int c = 0; c < b_cols * H; ++c) B[size_t(r) * ldb + c] = u(gen);
        const int ldc = interleaved ? H * hd + 3 : T;
        const int64_t stride_c = interleaved ? hd : int64_t(T) * T + 7;
        const size_t c_size = interleaved ? size_t(m) * ldc : size_t(stride_c) * H;
        std::vector<float> C(c_size, kSentinel);
        std::vector<bool> member(c_size, false);
        for (int h = 0; h < H; ++h)
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              const size_t e = size_t(h * stride_c) + size_t(i) * ldc + j;
              member[e] = true;
              C[e] = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : u(gen);
            }
        const std::vector<float> c0 = C;
        gemm_bf16_batched(ta, tb, m, n, kk, 0.75f, A.data(), lda, a_cols, B.data(), ldb, b_cols, beta, C.data(), ldc,
                          stride_c, H);
        int bad = 0;
        std::string what;
        for (int h = 0; h < H; ++h)
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              double dot = 0, mag = 0;
              for (int l = 0; l < kk; ++l) {
                const double p = double(bf16_round(at(A.data() + h * a_cols, lda, ta, i, l))) *
                                 double(bf16_round(at(B.data() + h * b_cols, ldb, tb, l, j)));
                dot += p;
                mag += std::fabs(p);
              }
              const size_t e = size_t(h * stride_c) + size_t(i) * ldc + j;
              const double cb = beta == 0.0f ? 0.0 : double(beta) * double(c0[e]);
              const double ref = 0.75 * dot + cb;
              const double bound = (kk + 3) * double(FLT_EPSILON) * (0.75 * mag + std::fabs(cb));
              if (!(std::fabs(double(C[e]) - ref) <= bound) && bad++ == 0)
                what = "member " + std::to_string(h) + " C[" + std::to_string(i) + "][" + std::to_string(j) +
                       "] = " + std::to_string(C[e]) + ", reference " + std::to_string(ref);
            }
        int written = 0;
        for (size_t e = 0; e < c_size; ++e) written += !member[e] && std::memcmp(&C[e], &kSentinel, sizeof(float)) != 0;
        INFO("ta " << ta << " tb " << tb << " beta " << beta << (interleaved ? " interleaved C" : " blocked C") << ": "
                   << what);
        CHECK(bad == 0);
        CHECK(written == 0);
      }
    }
  }
}

TEST_CASE("sgemm_batched_on under bf16 precision: one call equal to the members' own sgemm, recorded as them",
          "[gemm_bf16]") {
  // The attention's scores: 4 heads, T = 32, hd = 16, C blocked.
  const int H = 4, T = 32, hd = 16, ld = 3 * H * hd;
  std::mt19937 gen(23);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> qkv(size_t(T) * ld);
  for (float& v : qkv) v = u(gen);
  std::vector<float> batched(size_t(H) * T * T), looped(batched.size());
  GemmRecorder rec;
  {
    const GemmRecordScope record(rec);
    const GemmPrecisionScope bf16(GemmPrecision::bf16);
    sgemm_batched_on(false, false, true, T, T, hd, 0.25f, qkv.data(), ld, hd, qkv.data() + H * hd, ld, hd, 0.0f,
                     batched.data(), T, int64_t(T) * T, H);
  }
  // Each member's own product at the same precision: gemm_bf16 where bf16 is native; else
  // sgemm stays fp32 on the operands as given (gemm.h; the trainer's emulation rounds the
  // weights, not each product's operands), which gemm_bf16's emulation would round
  // (4011 of these 4096 elements off on an AVX2 CPU).
  {
    const GemmPrecisionScope bf16(GemmPrecision::bf16);
    for (int h = 0; h < H; ++h)
      sgemm(false, true, T, T, hd, 0.25f, qkv.data() + h * hd, ld, qkv.data() + H * hd + h * hd, ld, 0.0f,
            looped.data() + size_t(h) * T * T, T);
  }
  // Native, both sum the same exact bf16 products in fp32, oneDNN perhaps in another order
  // for a 3-D call: within twice the exact bound of each other. Emulated, the same calls.
  int bad = 0;
  for (size_t e = 0; e < batched.size(); ++e)
    bad += !(std::fabs(batched[e] - looped[e]) <= 2 * (hd + 3) * FLT_EPSILON * 0.25f * hd);
  CHECK(bad == 0);
  if (!bf16_gemm_native()) CHECK(batched == looped);
  REQUIRE(rec.calls().size() == 1u);
  CHECK(rec.calls().begin()->second == H);
  CHECK(rec.calls().begin()->first.bf16 == bf16_gemm_native());
}
