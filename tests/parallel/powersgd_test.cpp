// PowerSGD's compressor (parallel/ddp/powersgd.h) against float64 references computed
// here: a matrix of rank <= R comes back exactly (to fp32 rounding); one step equals the
// textbook power iteration in double; error feedback loses nothing over many steps (one
// rank and two simulated ranks, whose averaged gradients are identical); P's columns come
// out orthonormal, dependent ones zero; the wire counts follow R (n + m).
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "parallel/ddp/powersgd.h"
#include "parallel/ddp/powersgd_checkpoint.h"

namespace {

using Mat = std::vector<double>;  // row-major

dpt::ParamInfo param(std::vector<int64_t> shape, size_t offset, size_t index) {
  dpt::ParamInfo p;
  p.shape = shape;
  p.numel = 1;
  for (auto d : shape) p.numel *= size_t(d);
  p.offset = offset;
  p.index = index;
  p.name = "p" + std::to_string(index);
  return p;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// A = B C with B n x r, C r x m: rank <= r.
std::vector<float> low_rank(size_t n, size_t m, size_t r, uint32_t seed) {
  auto b = random_floats(n * r, seed), c = random_floats(r * m, seed + 1);
  std::vector<float> a(n * m);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < m; ++j) {
      double s = 0;
      for (size_t k = 0; k < r; ++k) s += double(b[i * r + k]) * c[k * m + j];
      a[i * m + j] = float(s);
    }
  return a;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

// Classical Gram-Schmidt in double, no guard (the reference for full-rank inputs).
void gram_schmidt(Mat& p, size_t n, size_t cols) {
  for (size_t i = 0; i < cols; ++i) {
    for (size_t j = 0; j < i; ++j) {
      double d = 0;
      for (size_t r = 0; r < n; ++r) d += p[r * cols + j] * p[r * cols + i];
      for (size_t r = 0; r < n; ++r) p[r * cols + i] -= d * p[r * cols + j];
    }
    double s = 0;
    for (size_t r = 0; r < n; ++r) s += p[r * cols + i] * p[r * cols + i];
    for (size_t r = 0; r < n; ++r) p[r * cols + i] /= std::sqrt(s);
  }
}

// (A^T B)[i][j] for row-major A n x a, B n x b.
Mat at_b(const std::vector<float>& a, size_t n, size_t ca, const std::vector<float>& b, size_t cb) {
  Mat out(ca * cb, 0.0);
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < ca; ++i)
      for (size_t j = 0; j < cb; ++j) out[i * cb + j] += double(a[r * ca + i]) * b[r * cb + j];
  return out;
}

// One step of a one-rank bucket: what compress..decompress leave in grads.
void step(dpt::PowerSgdBucket& c, std::vector<float>& grads) {
  c.compress(grads);
  const auto q = c.project(grads);
  std::copy(q.begin(), q.end(), c.q_average().begin());  // the average over one rank
  c.remember_error(grads);
  c.decompress(grads);
}

}  // namespace

TEST_CASE("powersgd: orthonormalised columns have P^T P = I; dependent ones become zero", "[powersgd]") {
  const size_t n = 300, cols = 6;
  auto p = random_floats(n * cols, 7);
  dpt::orthonormalize_columns(p.data(), n, cols);
  Mat g = at_b(p, n, cols, p, cols);
  for (size_t i = 0; i < cols; ++i)
    for (size_t j = 0; j < cols; ++j) CHECK(std::fabs(g[i * cols + j] - (i == j ? 1.0 : 0.0)) < 1e-6);

  // Nearly dependent columns (the second 1e-3 away from the first): still orthonormal to
  // fp32 rounding (one Gram-Schmidt pass would leave them 1e-4 apart from orthogonal).
  auto near = random_floats(n * 2, 8);
  for (size_t r = 0; r < n; ++r) near[r * 2 + 1] = near[r * 2] + 1e-3f * near[r * 2 + 1];
  dpt::orthonormalize_columns(near.data(), n, 2);
  Mat gn = at_b(near, n, 2, near, 2);
  CHECK(std::fabs(gn[1]) < 1e-6);
  CHECK(std::fabs(gn[0] - 1.0) < 1e-6);
  CHECK(std::fabs(gn[3] - 1.0) < 1e-6);

  // Columns 2 and 4 are combinations of the others (and column 5 is zero): they come out
  // zero, the rest orthonormal. Without the guard they would be normalised rounding noise.
  auto q = random_floats(n * cols, 9);
  for (size_t r = 0; r < n; ++r) {
    q[r * cols + 2] = 0.5f * q[r * cols + 0] - 2.0f * q[r * cols + 1];
    q[r * cols + 4] = q[r * cols + 3] + q[r * cols + 2];
    q[r * cols + 5] = 0.0f;
  }
  dpt::orthonormalize_columns(q.data(), n, cols);
  Mat h = at_b(q, n, cols, q, cols);
  for (size_t i = 0; i < cols; ++i)
    for (size_t j = 0; j < cols; ++j) {
      const bool live = i != 2 && i != 4 && i != 5;
      CHECK(std::fabs(h[i * cols + j] - (i == j && live ? 1.0 : 0.0)) < 1e-6);
    }
}

TEST_CASE("powersgd: a matrix of rank <= R is rebuilt within fp32 rounding", "[powersgd]") {
  const int R = 4;
  // Exact rank R and rank 2 < R (two of P's columns dependent), and a Conv2d-like 4-dim
  // weight [8, 3, 3, 3] viewed as 8 x 27, of rank 3.
  for (size_t r : {size_t(4), size_t(2)}) {
    const size_t n = 64, m = 48;
    auto a = low_rank(n, m, r, 11);
    std::vector<float> grads = a;
    dpt::PowerSgdBucket c({param({int64_t(n), int64_t(m)}, 0, 0)}, R, 1);
    REQUIRE(c.num_compressed() == 1);
    step(c, grads);
    double err = 0;
    for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::fabs(double(grads[i]) - a[i]));
    INFO("rank " << r << ": max |approximation - M| = " << err << ", max |M| = " << max_abs(a));
    CHECK(err <= 1e-5 * max_abs(a));
  }
  auto a = low_rank(8, 27, 3, 13);
  std::vector<float> grads = a;
  dpt::PowerSgdBucket c({param({8, 3, 3, 3}, 0, 0)}, R, 1);
  REQUIRE(c.num_compressed() == 1);
  step(c, grads);
  for (size_t i = 0; i < a.size(); ++i) CHECK(std::fabs(grads[i] - a[i]) <= 1e-5 * max_abs(a));
}

TEST_CASE("powersgd: one step is the power iteration P = orth(M Q), approximation P (M^T P)^T (float64 reference)", "[powersgd]") {
  const int R = 3;
  const size_t n = 40, m = 30;
  auto M = random_floats(n * m, 21);
  std::vector<float> grads = M;
  dpt::PowerSgdBucket c({param({int64_t(n), int64_t(m)}, 0, 0)}, R, 5);
  const auto q0 = c.q_of(0);
  std::vector<float> Q0(q0.begin(), q0.end());
  step(c, grads);
  // The reference in double: P = M Q0, orthonormalised; Q = M^T P; approximation P Q^T;
  // error M - P Q^T; the kept Q is that Q.
  Mat P(n * R, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < size_t(R); ++k)
      for (size_t j = 0; j < m; ++j) P[i * R + k] += double(M[i * m + j]) * Q0[j * R + k];
  gram_schmidt(P, n, R);
  Mat Q(m * R, 0.0);
  for (size_t j = 0; j < m; ++j)
    for (size_t k = 0; k < size_t(R); ++k)
      for (size_t i = 0; i < n; ++i) Q[j * R + k] += double(M[i * m + j]) * P[i * R + k];
  double worst = 0, scale = max_abs(M);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < m; ++j) {
      double approx = 0;
      for (size_t k = 0; k < size_t(R); ++k) approx += P[i * R + k] * Q[j * R + k];
      worst = std::max(worst, std::fabs(approx - grads[i * m + j]));
    }
  CHECK(worst <= 1e-5 * scale);
  const auto q1 = c.q_of(0);
  double qscale = 0;
  for (double v : Q) qscale = std::max(qscale, std::fabs(v));
  for (size_t i = 0; i < Q.size(); ++i) CHECK(std::fabs(q1[i] - Q[i]) <= 1e-5 * qscale);
  // Next step, M = 0: the approximation is exactly what was left out (error feedback).
  std::fill(grads.begin(), grads.end(), 0.0f);
  step(c, grads);
  double left = 0;
  for (float g : grads) left = std::max(left, double(std::fabs(g)));
  CHECK(left > 1e-2 * scale);  // rank 3 of a random 40 x 30 leaves most of it out
}

TEST_CASE("powersgd: error feedback loses nothing: sum of approximations + final error = sum of gradients", "[powersgd]") {
  // A bucket as DDP cuts it: a bias, a compressed matrix, a thin matrix (R (n+m) >= n m:
  // uncompressed), a 1-dim norm weight and another compressed matrix.
  const int R = 2;
  const std::vector<dpt::ParamInfo> params = {param({5}, 0, 0), param({20, 16}, 5, 1), param({2, 40}, 325, 2),
                                              param({7}, 405, 3), param({12, 9}, 412, 4)};
  const size_t total = 412 + 108;
  REQUIRE(dpt::powersgd_compresses(params[1], R));
  REQUIRE_FALSE(dpt::powersgd_compresses(params[2], R));
  REQUIRE_FALSE(dpt::powersgd_compresses(params[0], R));
  const auto wire = dpt::powersgd_wire(params, R);
  CHECK(wire.plain_floats == total);
  CHECK(wire.compressed_floats == 5 + 2 * (20 + 16) + 80 + 7 + 2 * (12 + 9));

  SECTION("one rank") {
    dpt::PowerSgdBucket c(params, R, 3);
    CHECK(c.payload_floats() + c.q_floats() == wire.compressed_floats);
    const int K = 25;
    std::vector<double> truth(total, 0.0), applied(total, 0.0);
    for (int k = 0; k < K; ++k) {
      auto g = random_floats(total, 100 + uint32_t(k));
      for (size_t i = 0; i < total; ++i) truth[i] += g[i];
      step(c, g);
      for (size_t i = 0; i < total; ++i) applied[i] += g[i];
    }
    // The final error: what the next step adds to a zero gradient before compressing.
    std::vector<float> zero(total, 0.0f);
    c.compress(zero);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < total; ++i) {
      worst = std::max(worst, std::fabs(applied[i] + zero[i] - truth[i]));
      scale = std::max(scale, std::fabs(truth[i]));
    }
    INFO("max |sum applied + error - sum gradients| = " << worst << " of max " << scale);
    CHECK(worst <= 1e-6 * scale * K);
    // And the compression really dropped something each step (else this proves nothing).
    double dropped = 0;
    for (size_t i = 5; i < 325; ++i) dropped = std::max(dropped, double(std::fabs(zero[i])));
    CHECK(dropped > 0.1);
  }

  SECTION("two simulated ranks: identical averaged gradients, nothing lost on average") {
    dpt::PowerSgdBucket c0(params, R, 3), c1(params, R, 3);
    const int K = 20;
    std::vector<double> truth(total, 0.0), applied(total, 0.0);
    auto average = [](std::span<float> a, std::span<float> b) {
      for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = (a[i] + b[i]) * 0.5f;
    };
    for (int k = 0; k < K; ++k) {
      auto g0 = random_floats(total, 200 + uint32_t(k)), g1 = random_floats(total, 300 + uint32_t(k));
      for (size_t i = 0; i < total; ++i) truth[i] += 0.5 * (double(g0[i]) + g1[i]);
      average(c0.compress(g0), c1.compress(g1));
      auto q0 = c0.project(g0), q1 = c1.project(g1);
      for (size_t i = 0; i < q0.size(); ++i) c0.q_average()[i] = c1.q_average()[i] = (q0[i] + q1[i]) * 0.5f;
      c0.remember_error(g0);
      c1.remember_error(g1);
      c0.decompress(g0);
      c1.decompress(g1);
      REQUIRE(g0 == g1);  // bit for bit: every rank applies the same gradient
      for (size_t i = 0; i < total; ++i) applied[i] += g0[i];
    }
    std::vector<float> e0(total, 0.0f), e1(total, 0.0f);
    c0.compress(e0);
    c1.compress(e1);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < total; ++i) {
      worst = std::max(worst, std::fabs(applied[i] + 0.5 * (double(e0[i]) + e1[i]) - truth[i]));
      scale = std::max(scale, std::fabs(truth[i]));
    }
    INFO("max |sum applied + mean error - sum mean gradients| = " << worst << " of max " << scale);
    CHECK(worst <= 1e-6 * scale * K);
  }
}

TEST_CASE("powersgd: a zero gradient keeps the rank (dead Q columns restart from the seed)", "[powersgd]") {
  const size_t n = 16, m = 12;
  dpt::PowerSgdBucket c({param({int64_t(n), int64_t(m)}, 0, 0)}, 2, 1);
  std::vector<float> zero(n * m, 0.0f);
  step(c, zero);
  for (float v : zero) CHECK(v == 0.0f);
  // After the all-zero step, a rank-2 gradient must still come back whole.
  auto a = low_rank(n, m, 2, 31);
  auto g = a;
  step(c, g);
  for (size_t i = 0; i < a.size(); ++i) CHECK(std::fabs(g[i] - a[i]) <= 1e-5 * max_abs(a));
}

TEST_CASE("powersgd: phases out of order and rank < 1 are refused", "[powersgd]") {
  std::vector<float> g(6, 1.0f);
  dpt::PowerSgdBucket c({param({3, 2}, 0, 0)}, 1, 1);
  CHECK_THROWS_AS(c.project(g), std::logic_error);
  CHECK_THROWS_AS(dpt::PowerSgdBucket({param({3, 2}, 0, 0)}, 0, 1), std::invalid_argument);
}

// ---- PowerSGD's state in a checkpoint, restored into another world, rank or layout ----
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/dpt_psgd_ckpt_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Two buckets (a 16x12 matrix with a bias; an 8x8 matrix) at rank 2, each rank's state
// made distinct: Q from `q_seed` (the same on every rank), error from `e_seed` (its own).
dpt::PowerSgdBuckets make_buckets(int bucket_count = 2) {
  dpt::PowerSgdBuckets b;
  b.push_back(std::make_unique<dpt::PowerSgdBucket>(
      std::vector<dpt::ParamInfo>{param({16, 12}, 0, 0), param({16}, 192, 1)}, 2, 7));
  if (bucket_count > 1)
    b.push_back(std::make_unique<dpt::PowerSgdBucket>(std::vector<dpt::ParamInfo>{param({8, 8}, 208, 2)}, 2, 7));
  return b;
}
void fill_state(dpt::PowerSgdBuckets& b, uint32_t q_seed, uint32_t e_seed) {
  for (size_t i = 0; i < b.size(); ++i) {
    auto q = random_floats(b[i]->q_state().size(), q_seed + uint32_t(i));
    auto e = random_floats(b[i]->error_state().size(), e_seed + uint32_t(i));
    std::copy(q.begin(), q.end(), b[i]->q_state().begin());
    std::copy(e.begin(), e.end(), b[i]->error_state().begin());
  }
}
std::vector<float> copy_of(std::span<float> s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("powersgd checkpoint: same world, each rank its own error; another world, Q and zero error; "
          "another layout, fresh", "[powersgd]") {
  TempDir dir;
  const std::string model = dir.path + "/model.safetensors";
  // A 2-rank run's checkpoint: Q the same on both ranks, errors different.
  std::vector<dpt::PowerSgdBuckets> saved(2);
  for (int r = 0; r < 2; ++r) {
    saved[size_t(r)] = make_buckets();
    fill_state(saved[size_t(r)], 100, 200 + 10 * uint32_t(r));
    dpt::save_powersgd_state(model, saved[size_t(r)], r, 2);
  }
  SECTION("the same world: rank 1 gets rank 1's error (not rank 0's) and Q") {
    for (int r = 0; r < 2; ++r) {
      auto b = make_buckets();
      CHECK(dpt::load_powersgd_state(model, b, r, 2).empty());
      for (size_t i = 0; i < b.size(); ++i) {
        CHECK(copy_of(b[i]->q_state()) == copy_of(saved[size_t(r)][i]->q_state()));
        CHECK(copy_of(b[i]->error_state()) == copy_of(saved[size_t(r)][i]->error_state()));
      }
    }
  }
  SECTION("another world size: Q continues, every error restarts from zero") {
    for (int r = 0; r < 3; ++r) {
      auto b = make_buckets();
      const std::string note = dpt::load_powersgd_state(model, b, r, 3);
      CHECK_THAT(note, Catch::Contains("written by 2 ranks, this run has 3: Q continues"));
      for (size_t i = 0; i < b.size(); ++i) {
        CHECK(copy_of(b[i]->q_state()) == copy_of(saved[0][i]->q_state()));
        CHECK(max_abs(copy_of(b[i]->error_state())) == 0.0);
      }
    }
  }
  SECTION("another bucket layout or approximation rank: the fresh state, said") {
    auto fresh = make_buckets(1);
    auto b = make_buckets(1);
    fill_state(b, 300, 400);
    CHECK_THAT(dpt::load_powersgd_state(model, b, 0, 2), Catch::Contains("PowerSGD starts afresh"));
    CHECK(copy_of(b[0]->q_state()) == copy_of(fresh[0]->q_state()));
    CHECK(max_abs(copy_of(b[0]->error_state())) == 0.0);
    // Buffers of the same sizes built on other matrices (the bias first, so the 16x12
    // matrix sits at another offset): fresh too, not the other matrices' state.
    dpt::PowerSgdBuckets other;
    other.push_back(std::make_unique<dpt::PowerSgdBucket>(
        std::vector<dpt::ParamInfo>{param({16}, 0, 0), param({16, 12}, 16, 1)}, 2, 7));
    other.push_back(std::make_unique<dpt::PowerSgdBucket>(std::vector<dpt::ParamInfo>{param({8, 8}, 208, 2)}, 2, 7));
    REQUIRE(other[0]->q_state().size() == saved[1][0]->q_state().size());
    REQUIRE(other[0]->error_state().size() == saved[1][0]->error_state().size());
    fill_state(other, 500, 600);
    CHECK_THAT(dpt::load_powersgd_state(model, other, 1, 2), Catch::Contains("holds other matrices"));
    CHECK(max_abs(copy_of(other[0]->error_state())) == 0.0);
  }
}
