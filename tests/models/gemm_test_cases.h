#pragma once
// GEMM test cases shared by models_gemm_test.cpp and models_gemm_bf16_test.cpp: a shape
// with transposes, padded leading dimensions, alpha and beta; random operands whose
// padding is NaN (must never be read), C's padding a sentinel (must never be written),
// and C itself NaN when beta is 0 (must not be read then either).
#include <cstddef>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace dpt::test {

constexpr float kSentinel = -777.0f;

struct Case {
  bool ta = false, tb = false;
  int m = 1, n = 1, k = 1;
  int pad_a = 0, pad_b = 0, pad_c = 0;
  float alpha = 1.0f, beta = 0.0f;

  int lda() const { return (ta ? m : k) + pad_a; }
  int ldb() const { return (tb ? k : n) + pad_b; }
  int ldc() const { return n + pad_c; }
  std::string str() const {
    std::ostringstream s;
    s << (ta ? 'T' : 'N') << (tb ? 'T' : 'N') << " m=" << m << " n=" << n << " k=" << k << " lda=" << lda()
      << " ldb=" << ldb() << " ldc=" << ldc() << " alpha=" << alpha << " beta=" << beta;
    return s.str();
  }
};

struct Operands {
  std::vector<float> a, b, c0;
};

// A row-major matrix of `rows` x `cols` in a buffer with leading dimension ld: the
// columns past `cols` hold `pad`.
inline std::vector<float> matrix(int rows, int cols, int ld, float pad, std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> m(static_cast<size_t>(rows) * ld, pad);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) m[static_cast<size_t>(i) * ld + j] = u(gen);
  return m;
}

inline Operands make_operands(const Case& c, std::mt19937& gen) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Operands o;
  o.a = c.ta ? matrix(c.k, c.m, c.lda(), nan, gen) : matrix(c.m, c.k, c.lda(), nan, gen);
  o.b = c.tb ? matrix(c.n, c.k, c.ldb(), nan, gen) : matrix(c.k, c.n, c.ldb(), nan, gen);
  // beta == 0: C must not be read, so it starts as NaN; otherwise random. Padding: sentinel.
  o.c0 = matrix(c.m, c.n, c.ldc(), kSentinel, gen);
  if (c.beta == 0.0f)
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) o.c0[static_cast<size_t>(i) * c.ldc() + j] = nan;
  return o;
}

inline float at_a(const Case& c, const Operands& o, int i, int l) {
  return c.ta ? o.a[static_cast<size_t>(l) * c.lda() + i] : o.a[static_cast<size_t>(i) * c.lda() + l];
}
inline float at_b(const Case& c, const Operands& o, int l, int j) {
  return c.tb ? o.b[static_cast<size_t>(j) * c.ldb() + l] : o.b[static_cast<size_t>(l) * c.ldb() + j];
}

}  // namespace dpt::test
