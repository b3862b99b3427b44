#include "parallel/ddp/powersgd.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "models/kernels/cpu/gemm_choice.h"
#include "models/kernels/cpu/gemm_engine.h"

namespace dpt {
namespace {

// A column keeping less than this fraction of its norm after the earlier columns are
// removed is taken as dependent on them: twice-run Gram-Schmidt leaves rounding noise
// of a few fp32 ulps there, far below it.
constexpr double kDependentFraction = 1e-4;

// Row-major C = alpha op(A) op(B) + beta C on the engine sgemm() runs, without the
// recording and bf16 precision scope of the model's products (this is not model compute).
void gemm(bool ta, bool tb, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda, const float* b,
          size_t ldb, float beta, float* c, size_t ldc) {
  sgemm_with(gemm_engine_for(int(m), int(n), int(k)), ta, tb, int(m), int(n), int(k), alpha, a, int(lda), b,
             int(ldb), beta, c, int(ldc));
}

// Mixes the run's seed with a parameter index (splitmix64's finaliser) so each matrix
// gets its own stream, the same on every rank.
uint64_t mix(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) from mt19937_64's bits (its sequence is fixed by the standard; the
// standard's distributions are not, so a rank built with another library could differ).
void seeded_matrix(uint64_t seed, std::span<float> out) {
  std::mt19937_64 gen(seed);
  for (auto& v : out) v = float(double(gen() >> 40) * 0x1p-23 - 1.0);
}

size_t matrix_cols(const ParamInfo& p) { return p.numel / size_t(p.shape.at(0)); }

}  // namespace

void orthonormalize_columns(float* p, size_t n, size_t cols) {
  for (size_t i = 0; i < cols; ++i) {
    auto norm = [&] {
      double s = 0;
      for (size_t r = 0; r < n; ++r) s += double(p[r * cols + i]) * p[r * cols + i];
      return std::sqrt(s);
    };
    const double before = norm();
    for (int pass = 0; pass < 2; ++pass)
      for (size_t j = 0; j < i; ++j) {
        double d = 0;
        for (size_t r = 0; r < n; ++r) d += double(p[r * cols + j]) * p[r * cols + i];
        const float df = float(d);
        for (size_t r = 0; r < n; ++r) p[r * cols + i] -= df * p[r * cols + j];
      }
    const double after = norm();
    const bool dependent = !(before > 0) || !(after > kDependentFraction * before) || !std::isfinite(after);
    const float scale = float(1.0 / after);
    for (size_t r = 0; r < n; ++r) p[r * cols + i] = dependent ? 0.0f : p[r * cols + i] * scale;
  }
}

bool powersgd_compresses(const ParamInfo& p, int rank) {
  if (p.shape.size() < 2 || p.numel == 0) return false;
  const size_t n = size_t(p.shape[0]), m = matrix_cols(p), r = size_t(rank);
  return r * (n + m) < n * m;
}

PowerSgdWire powersgd_wire(const std::vector<ParamInfo>& params, int rank) {
  PowerSgdWire w;
  for (const auto& p : params) {
    w.plain_floats += p.numel;
    w.compressed_floats += powersgd_compresses(p, rank) ? size_t(rank) * (size_t(p.shape[0]) + matrix_cols(p)) : p.numel;
  }
  return w;
}

PowerSgdBucket::PowerSgdBucket(const std::vector<ParamInfo>& params, int rank, uint64_t seed) : rank_(rank) {
  if (rank < 1) throw std::invalid_argument("PowerSGD: the rank must be >= 1, got " + std::to_string(rank));
  const size_t r = size_t(rank);
  size_t p_floats = 0, q_floats = 0, err_floats = 0;
  for (const auto& p : params) {
    if (!powersgd_compresses(p, rank)) {
      plain_.push_back({p.offset, p.numel});
      plain_floats_ += p.numel;
      continue;
    }
    Matrix m;
    m.offset = p.offset;
    m.rows = size_t(p.shape[0]);
    m.cols = matrix_cols(p);
    m.p_at = p_floats;
    m.q_at = q_floats;
    m.err_at = err_floats;
    m.seed = mix(seed, p.index);
    p_floats += m.rows * r;
    q_floats += m.cols * r;
    err_floats += p.numel;
    mats_.push_back(m);
  }
  for (auto& m : mats_) m.p_at += plain_floats_;
  payload_.resize(plain_floats_ + p_floats);
  q_.resize(q_floats);
  q_local_.resize(q_floats);
  error_.resize(err_floats);
  reset();
}

void PowerSgdBucket::reset() {
  std::fill(error_.begin(), error_.end(), 0.0f);
  for (const auto& m : mats_) seeded_matrix(m.seed, std::span<float>(q_).subspan(m.q_at, m.cols * size_t(rank_)));
  phase_ = Phase::idle;
}

void PowerSgdBucket::expect(Phase p, const char* call) const {
  if (phase_ != p) throw std::logic_error(std::string("PowerSgdBucket::") + call + " called out of order");
}

std::span<float> PowerSgdBucket::compress(std::span<float> grads) {
  expect(Phase::idle, "compress");
  const size_t r = size_t(rank_);
  size_t at = 0;
  for (const auto& s : plain_) {
    std::copy_n(grads.data() + s.offset, s.numel, payload_.data() + at);
    at += s.numel;
  }
  for (const auto& m : mats_) {
    float* M = grads.data() + m.offset;
    const float* e = error_.data() + m.err_at;
    for (size_t i = 0; i < m.rows * m.cols; ++i) M[i] += e[i];
    gemm(false, false, m.rows, r, m.cols, 1.0f, M, m.cols, q_.data() + m.q_at, r, 0.0f, payload_.data() + m.p_at, r);
  }
  phase_ = Phase::compressed;
  return payload_;
}

std::span<float> PowerSgdBucket::project(std::span<float> grads) {
  expect(Phase::compressed, "project");
  const size_t r = size_t(rank_);
  size_t at = 0;
  for (const auto& s : plain_) {
    std::copy_n(payload_.data() + at, s.numel, grads.data() + s.offset);
    at += s.numel;
  }
  for (const auto& m : mats_) {
    float* P = payload_.data() + m.p_at;
    orthonormalize_columns(P, m.rows, r);
    gemm(true, false, m.cols, r, m.rows, 1.0f, grads.data() + m.offset, m.cols, P, r, 0.0f, q_local_.data() + m.q_at, r);
  }
  phase_ = Phase::projected;
  return q_local_;
}

void PowerSgdBucket::remember_error(std::span<const float> grads) {
  expect(Phase::projected, "remember_error");
  const size_t r = size_t(rank_);
  for (const auto& m : mats_) {
    float* e = error_.data() + m.err_at;
    std::copy_n(grads.data() + m.offset, m.rows * m.cols, e);
    gemm(false, true, m.rows, m.cols, r, -1.0f, payload_.data() + m.p_at, r, q_local_.data() + m.q_at, r, 1.0f, e, m.cols);
  }
  phase_ = Phase::remembered;
}

void PowerSgdBucket::decompress(std::span<float> grads) {
  expect(Phase::remembered, "decompress");
  const size_t r = size_t(rank_);
  for (const auto& m : mats_) {
    float* Q = q_.data() + m.q_at;
    gemm(false, true, m.rows, m.cols, r, 1.0f, payload_.data() + m.p_at, r, Q, r, 0.0f, grads.data() + m.offset, m.cols);
    // A column of P found dependent is zero, so is Q's: warm-started from it, the next
    // P's column would be zero again and the rank would stay lost for good. Such a
    // column starts afresh from the seed (Q is the same on every rank, so is this).
    std::vector<float> fresh;
    for (size_t c = 0; c < r; ++c) {
      bool zero = true;
      for (size_t i = 0; i < m.cols && zero; ++i) zero = Q[i * r + c] == 0.0f;
      if (!zero) continue;
      if (fresh.empty()) {
        fresh.resize(m.cols * r);
        seeded_matrix(m.seed, fresh);
      }
      for (size_t i = 0; i < m.cols; ++i) Q[i * r + c] = fresh[i * r + c];
    }
  }
  phase_ = Phase::idle;
}

size_t PowerSgdBucket::state_bytes() const {
  return (payload_.size() + q_.size() + q_local_.size() + error_.size()) * sizeof(float);
}

std::span<const float> PowerSgdBucket::q_of(size_t i) const {
  const auto& m = mats_.at(i);
  return std::span<const float>(q_).subspan(m.q_at, m.cols * size_t(rank_));
}

std::string PowerSgdBucket::layout() const {
  std::string s;
  for (const auto& m : mats_) {
    if (!s.empty()) s += ';';
    s += std::to_string(m.offset) + ':' + std::to_string(m.rows) + 'x' + std::to_string(m.cols);
  }
  return s;
}

}  // namespace dpt
