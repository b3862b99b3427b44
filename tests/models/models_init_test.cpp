// init_normal (models/nn/init.h): the values GPT-2's and the conv layers' weights start
// from. Drawn in blocks on parallel_for's threads, they must be the bits a serial draw
// gives, follow N(0, stddev) (Kolmogorov-Smirnov against the normal CDF from erfc, in
// double), and no block may repeat another (each block has its own generator).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "models/kernels/cpu/parallel_for.h"
#include "models/nn/init.h"

using namespace dpt;

namespace {

// Four full blocks of 65536 and a ragged, odd tail: the pairwise draw's last lone value.
constexpr size_t kValues = 4 * 65536 + 12345;

std::vector<float> draw(float stddev, uint64_t seed, bool serial) {
  std::vector<float> v(kValues, -1.0f);
  if (serial) {
    SerialLoopsScope one_thread;
    init_normal(v, stddev, seed);
  } else {
    init_normal(v, stddev, seed);
  }
  return v;
}

}  // namespace

TEST_CASE("init_normal: threaded blocks give the serial bits", "[models][init]") {
  const auto threaded = draw(0.02f, 7, false), serial = draw(0.02f, 7, true);
  REQUIRE(std::memcmp(threaded.data(), serial.data(), kValues * sizeof(float)) == 0);
  CHECK(draw(0.02f, 8, false) != threaded);  // another seed, other values
}

TEST_CASE("init_normal: N(0, stddev) by Kolmogorov-Smirnov, blocks independent", "[models][init]") {
  const double stddev = 0.5;
  for (uint64_t seed : {1ull, 99ull, 123456789ull}) {
    INFO("seed " << seed);
    auto v = draw(float(stddev), seed, false);
    const size_t n = v.size();
    // Every value of the last (odd) block is drawn, nothing left at the fill value.
    CHECK(std::count(v.begin(), v.end(), -1.0f) <= 1);
    // No block starts like another: a generator shared by blocks would repeat them.
    for (size_t a = 0; a < 4; ++a)
      for (size_t b = a + 1; b < 5; ++b)
        CHECK(std::memcmp(v.data() + a * 65536, v.data() + b * 65536, 64 * sizeof(float)) != 0);
    std::vector<double> x(v.begin(), v.end());
    std::sort(x.begin(), x.end());
    double d = 0;
    for (size_t i = 0; i < n; ++i) {
      const double cdf = 0.5 * std::erfc(-x[i] / (stddev * std::sqrt(2.0)));
      d = std::max({d, cdf - double(i) / double(n), double(i + 1) / double(n) - cdf});
    }
    // The KS statistic exceeds sqrt(ln(2/alpha) / 2) / sqrt(n) with probability alpha for
    // a true N(0, stddev) sample: alpha = 1e-6 here (0.0049 at this n).
    const double bound = std::sqrt(std::log(2.0 / 1e-6) / 2.0) / std::sqrt(double(n));
    INFO("KS statistic " << d << ", bound " << bound);
    CHECK(d < bound);
  }
}
