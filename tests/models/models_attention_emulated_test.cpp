// The fused causal attention kernels (models/kernels/cuda/gpu_attention_kernels.cuh, fp32, and
// gpu_attention_tc_kernels.cuh, bf16/fp16 on tensor cores through WMMA) run on CPU threads
// through tests/support/cuda_emulation.h, launched as gpu_attention.cu launches them,
// against a float64 reference of attention's forward and backward: the kernels' tiling,
// causal masks, online softmax, log-sum-exp recomputation, lane reductions and fragment
// layouts are checked on every machine, not only where a GPU is lent (gpu.models runs the
// same kernels on a GPU against the CPU model).
//
// Shapes: head widths 16, 64 and 80 (the 32-, 64- and 128-column instantiations, 1, 2
// and 4 lanes per row), sequences with a partial last 64-row tile and several 32-row
// stages, B and H above 1 so that the (sample, head) offsets are exercised.
#include <catch2/catch.hpp>

#include "tests/support/cuda_emulation.h"
// The kernels after the emulation: they see its __global__, __shared__, threadIdx, ...
#include "models/kernels/cuda/gpu_attention_kernels.cuh"
#include "models/kernels/cuda/gpu_attention_tc_kernels.cuh"

#include <cmath>
#include <random>
#include <vector>

#include "models/nn/layers/dropout.h"

using namespace dpt::gpu::attention_kernels;
namespace tc = dpt::gpu::attention_tc_kernels;
using cuda_emulation::emulate_launch;

namespace {

struct Shape {
  int b, heads, t, hd;
  int d() const { return heads * hd; }
};

// out [B, T, d], lse [B, H, T], dqkv [B, T, 3d] in float64 for qkv and dout, as
// models/nn/layers/attention.h defines them.
struct Reference {
  std::vector<double> out, lse, dqkv;
};

// drop: the dropout factor of each [B, H, T, T] probability (0 or 1 / (1 - p)), or null.
Reference reference(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout, double scale,
                    const std::vector<float>* drop = nullptr) {
  const int d = s.d(), t = s.t;
  Reference r;
  r.out.assign(size_t(s.b) * t * d, 0.0);
  r.lse.assign(size_t(s.b) * s.heads * t, 0.0);
  r.dqkv.assign(size_t(s.b) * t * 3 * d, 0.0);
  auto q = [&](int b, int i, int h, int c) { return double(qkv[(size_t(b) * t + i) * 3 * d + h * s.hd + c]); };
  auto k = [&](int b, int j, int h, int c) { return double(qkv[(size_t(b) * t + j) * 3 * d + d + h * s.hd + c]); };
  auto v = [&](int b, int j, int h, int c) { return double(qkv[(size_t(b) * t + j) * 3 * d + 2 * d + h * s.hd + c]); };
  auto dy = [&](int b, int i, int h, int c) { return double(dout[(size_t(b) * t + i) * d + h * s.hd + c]); };
  for (int b = 0; b < s.b; ++b)
    for (int h = 0; h < s.heads; ++h) {
      std::vector<double> p(size_t(t) * t, 0.0), ds(size_t(t) * t, 0.0), f(size_t(t) * t, 1.0);
      if (drop)
        for (size_t e = 0; e < f.size(); ++e) f[e] = (*drop)[(size_t(b) * s.heads + h) * t * t + e];
      for (int i = 0; i < t; ++i) {
        double mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int c = 0; c < s.hd; ++c) dot += q(b, i, h, c) * k(b, j, h, c);
          p[size_t(i) * t + j] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += std::exp(p[size_t(i) * t + j] - mx);
        r.lse[(size_t(b) * s.heads + h) * t + i] = mx + std::log(sum);
        for (int j = 0; j <= i; ++j) p[size_t(i) * t + j] = std::exp(p[size_t(i) * t + j] - mx) / sum;
        for (int c = 0; c < s.hd; ++c) {
          double o = 0;
          for (int j = 0; j <= i; ++j) o += p[size_t(i) * t + j] * f[size_t(i) * t + j] * v(b, j, h, c);
          r.out[(size_t(b) * t + i) * d + h * s.hd + c] = o;
        }
        // dS_ij = P_ij (dP_ij - sum_l P_il dP_il), dP_ij = f_ij dout_i . v_j
        double rowdot = 0;
        std::vector<double> dp(size_t(i) + 1);
        for (int j = 0; j <= i; ++j) {
          for (int c = 0; c < s.hd; ++c) dp[size_t(j)] += dy(b, i, h, c) * v(b, j, h, c);
          dp[size_t(j)] *= f[size_t(i) * t + j];
          rowdot += p[size_t(i) * t + j] * dp[size_t(j)];
        }
        for (int j = 0; j <= i; ++j) ds[size_t(i) * t + j] = p[size_t(i) * t + j] * (dp[size_t(j)] - rowdot);
      }
      for (int i = 0; i < t; ++i)
        for (int c = 0; c < s.hd; ++c) {
          double dq = 0, dk = 0, dv = 0;
          for (int j = 0; j <= i; ++j) dq += ds[size_t(i) * t + j] * k(b, j, h, c);
          for (int l = i; l < t; ++l) {  // i as a key: queries l >= i
            dk += ds[size_t(l) * t + i] * q(b, l, h, c);
            dv += p[size_t(l) * t + i] * f[size_t(l) * t + i] * dy(b, l, h, c);
          }
          double* row = &r.dqkv[(size_t(b) * t + i) * 3 * d + h * s.hd + c];
          row[0] = dq * scale;
          row[d] = dk * scale;
          row[2 * d] = dv;
        }
    }
  return r;
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0, w = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    e += (got[i] - want[i]) * (got[i] - want[i]);
    w += want[i] * want[i];
  }
  return std::sqrt(e / w);
}

// The launches of gpu_attention.cu, through the emulation.
template <int HD>
void run(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout, float scale,
         std::vector<float>& out, std::vector<float>& lse, std::vector<float>& dqkv, dpt::gpu::DropMask drop = {}) {
  const dim3 grid(unsigned((s.t + kRows - 1) / kRows), unsigned(s.b * s.heads));
  const unsigned threads = kRows * (HD / 32);
  emulate_launch(grid, dim3(threads), attention_fwd_k<HD>, qkv.data(), out.data(), lse.data(), s.t, s.heads, s.hd,
                 scale, drop);
  std::vector<float> delta(lse.size(), NAN);
  const size_t rows = size_t(s.b) * s.heads * s.t;
  emulate_launch(dim3(unsigned((rows * 32 + 255) / 256)), dim3(256), attention_delta_k, out.data(), dout.data(),
                 delta.data(), s.b, s.t, s.heads, s.hd);
  emulate_launch(grid, dim3(threads), attention_dq_k<HD>, qkv.data(), dout.data(), lse.data(), delta.data(),
                 dqkv.data(), s.t, s.heads, s.hd, scale, drop);
  emulate_launch(grid, dim3(threads), attention_dkv_k<HD>, qkv.data(), dout.data(), lse.data(), delta.data(),
                 dqkv.data(), s.t, s.heads, s.hd, scale, drop);
}

// gpu_attention.cu's tensor-core launches: the fp32 delta kernel, then the WMMA kernels.
template <typename Half>
void run_tc(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout, float scale,
            std::vector<float>& out, std::vector<float>& lse, std::vector<float>& dqkv) {
  const dim3 grid(unsigned((s.t + tc::kRows - 1) / tc::kRows), unsigned(s.b * s.heads));
  emulate_launch(grid, dim3(tc::kThreads), tc::attention_tc_fwd_k<Half>, qkv.data(), out.data(), lse.data(), s.t,
                 s.heads, s.hd, scale);
  std::vector<float> delta(lse.size(), NAN);
  const size_t rows = size_t(s.b) * s.heads * s.t;
  emulate_launch(dim3(unsigned((rows * 32 + 255) / 256)), dim3(256), attention_delta_k, out.data(), dout.data(),
                 delta.data(), s.b, s.t, s.heads, s.hd);
  emulate_launch(grid, dim3(tc::kThreads), tc::attention_tc_dq_k<Half>, qkv.data(), dout.data(), lse.data(),
                 delta.data(), dqkv.data(), s.t, s.heads, s.hd, scale);
  emulate_launch(grid, dim3(tc::kThreads), tc::attention_tc_dkv_k<Half>, qkv.data(), dout.data(), lse.data(),
                 delta.data(), dqkv.data(), s.t, s.heads, s.hd, scale);
}

struct Inputs {
  std::vector<float> qkv, dout;
  float scale;
};

Inputs make_inputs(const Shape& s) {
  std::mt19937 gen(uint32_t(s.t * 1000 + s.hd));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Inputs in{std::vector<float>(size_t(s.b) * s.t * 3 * s.d()), std::vector<float>(size_t(s.b) * s.t * s.d()),
            1.0f / std::sqrt(float(s.hd))};
  for (float& x : in.qkv) x = normal(gen);
  for (float& x : in.dout) x = normal(gen);
  return in;
}

// dQ, dK and dV's relative errors each, so that one of them wrong is not hidden by the
// others' size.
std::vector<double> part_errors(const Shape& s, const std::vector<float>& dqkv, const Reference& want) {
  std::vector<double> e;
  for (int part = 0; part < 3; ++part) {
    std::vector<float> got;
    std::vector<double> ref;
    for (size_t row = 0; row < size_t(s.b) * s.t; ++row)
      for (int c = 0; c < s.d(); ++c) {
        got.push_back(dqkv[row * 3 * s.d() + size_t(part) * s.d() + c]);
        ref.push_back(want.dqkv[row * 3 * s.d() + size_t(part) * s.d() + c]);
      }
    e.push_back(rel_l2(got, ref));
  }
  return e;
}

// The fp32 kernels' bounds: out, dQ, dK, dV within 1e-5 relative L2, log-sum-exp 1e-6.
void check_fp32_kernels(const Shape& s, const std::vector<float>& out, const std::vector<float>& lse,
                        const std::vector<float>& dqkv, const Reference& want) {
  const double e_out = rel_l2(out, want.out), e_lse = rel_l2(lse, want.lse);
  const std::vector<double> e_parts = part_errors(s, dqkv, want);
  INFO("relative L2 error: out " << e_out << " lse " << e_lse << " dQ " << e_parts[0] << " dK " << e_parts[1]
                                 << " dV " << e_parts[2]);
  CHECK(e_out < 1e-5);
  CHECK(e_lse < 1e-6);
  for (const double e : e_parts) CHECK(e < 1e-5);
}

}  // namespace

// bf16 / fp16 on (emulated) tensor cores: Q, K, V, dout, P and dS rounded to 16 bits,
// fp32 everywhere else. Against the float64 reference of the unrounded inputs the error
// is the 16-bit rounding's (relative L2 a few 2^-9 for bf16, 2^-12 for fp16), far below
// what a wrong mask, tile offset or fragment layout gives (of the order of 1); and above
// fp32's, so the 16-bit path is what ran. Heads of 16, 48 and 64 columns (zero-padded to
// the 64 the tiles hold), partial last tiles.
TEST_CASE("tensor-core attention kernels, emulated on the cpu, match a float64 reference", "[attention_emulated]") {
  for (const bool f16 : {false, true})
    for (const Shape s : {Shape{2, 2, 70, 16}, Shape{1, 2, 130, 64}, Shape{1, 1, 33, 48}}) {
      DYNAMIC_SECTION((f16 ? "fp16" : "bf16") << " B " << s.b << " H " << s.heads << " T " << s.t << " hd " << s.hd) {
        const Inputs in = make_inputs(s);
        std::vector<float> out(in.dout.size(), NAN), lse(size_t(s.b) * s.heads * s.t, NAN), dqkv(in.qkv.size(), NAN);
        if (f16) run_tc<__half>(s, in.qkv, in.dout, in.scale, out, lse, dqkv);
        else run_tc<__nv_bfloat16>(s, in.qkv, in.dout, in.scale, out, lse, dqkv);
        const Reference want = reference(s, in.qkv, in.dout, in.scale);
        const double e_out = rel_l2(out, want.out), e_lse = rel_l2(lse, want.lse);
        const std::vector<double> e_parts = part_errors(s, dqkv, want);
        INFO("relative L2 error: out " << e_out << " lse " << e_lse << " dQ " << e_parts[0] << " dK " << e_parts[1]
                                       << " dV " << e_parts[2]);
        const double bound = f16 ? 4e-3 : 3e-2;
        CHECK(e_out < bound);
        CHECK(e_lse < bound / 4);
        for (const double e : e_parts) CHECK(e < 2 * bound);
        CHECK(e_out > 1e-5);  // 16-bit operands, not fp32
      }
    }
}

TEST_CASE("fused attention kernels, emulated on the cpu, match a float64 reference", "[attention_emulated]") {
  for (const Shape s : {Shape{2, 2, 70, 16}, Shape{1, 2, 130, 64}, Shape{1, 1, 40, 80}}) {
    DYNAMIC_SECTION("B " << s.b << " H " << s.heads << " T " << s.t << " hd " << s.hd) {
      const Inputs in = make_inputs(s);
      // Outputs start as NaN: an element a kernel never writes fails the comparison.
      std::vector<float> out(in.dout.size(), NAN), lse(size_t(s.b) * s.heads * s.t, NAN), dqkv(in.qkv.size(), NAN);
      if (s.hd <= 32) run<32>(s, in.qkv, in.dout, in.scale, out, lse, dqkv);
      else if (s.hd <= 64) run<64>(s, in.qkv, in.dout, in.scale, out, lse, dqkv);
      else run<128>(s, in.qkv, in.dout, in.scale, out, lse, dqkv);
      const Reference want = reference(s, in.qkv, in.dout, in.scale);
      check_fp32_kernels(s, out, lse, dqkv, want);
    }
  }
}

// Attention dropout inside the fp32 kernels: the mask is the one the materialized path
// applies to the [B, H, T, T] probabilities (models/nn/layers/dropout.h's dropout_apply on a
// tensor of ones gives each element's factor), so the reference drops the same elements.
TEST_CASE("fused attention kernels with dropout, emulated on the cpu, match a float64 reference",
          "[attention_emulated]") {
  for (const Shape s : {Shape{2, 2, 70, 16}, Shape{1, 2, 100, 64}}) {
    DYNAMIC_SECTION("B " << s.b << " H " << s.heads << " T " << s.t << " hd " << s.hd) {
      const Inputs in = make_inputs(s);
      const float p = 0.25f;
      const uint64_t key = dpt::dropout_draw_key(12345, 7, 1);
      std::vector<float> factors(size_t(s.b) * s.heads * s.t * s.t, 1.0f);
      dpt::dropout_apply(factors.data(), factors.data(), factors.size(), p, key);
      size_t dropped = 0;
      for (const float f : factors) dropped += f == 0.0f;
      REQUIRE(dropped > factors.size() / 8);  // the mask does drop (about a quarter)
      dpt::gpu::DropMask drop;
      drop.on = true;
      drop.threshold = dpt::dropout_threshold(p);
      drop.scale = 1.0f / (1.0f - p);
      drop.key = key;
      std::vector<float> out(in.dout.size(), NAN), lse(size_t(s.b) * s.heads * s.t, NAN), dqkv(in.qkv.size(), NAN);
      if (s.hd <= 32) run<32>(s, in.qkv, in.dout, in.scale, out, lse, dqkv, drop);
      else run<64>(s, in.qkv, in.dout, in.scale, out, lse, dqkv, drop);
      const Reference want = reference(s, in.qkv, in.dout, in.scale, &factors);
      check_fp32_kernels(s, out, lse, dqkv, want);
      // Without the mask the kernels give the undropped attention: far from this reference.
      std::vector<float> plain(in.dout.size(), NAN), plain_lse(lse.size(), NAN), plain_dqkv(in.qkv.size(), NAN);
      if (s.hd <= 32) run<32>(s, in.qkv, in.dout, in.scale, plain, plain_lse, plain_dqkv);
      else run<64>(s, in.qkv, in.dout, in.scale, plain, plain_lse, plain_dqkv);
      CHECK(rel_l2(plain, want.out) > 1e-2);
    }
  }
}

