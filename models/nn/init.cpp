#include "models/nn/init.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "models/kernels/cpu/parallel_for.h"

namespace dpt {

uint64_t param_seed(uint64_t model_seed, const std::string& param_name) {
  // FNV-1a over the name, mixed with the model seed (splitmix64 finaliser).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : param_name) h = (h ^ ch) * 1099511628211ull;
  uint64_t z = h + model_seed * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void init_uniform(std::span<float> p, float bound, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(-bound, bound);
  for (float& v : p) v = dist(gen);
}

namespace {

// init_normal draws in blocks of this many values, each from its own generator seeded from
// (seed, block index): the values depend on the seed alone, never on how many threads
// drew them, and the blocks of a large parameter (GPT-2's 38.6M-value token embedding)
// are drawn on parallel_for's threads.
constexpr int64_t kNormalBlock = int64_t{1} << 16;

uint64_t block_seed(uint64_t seed, uint64_t block) {
  uint64_t z = seed + (block + 1) * 0x9e3779b97f4a7c15ull;  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Marsaglia's polar method in double over the generator's own bits, both values of each
// pair used: std::normal_distribution's algorithm differs between standard libraries, and
// drew through float math (5 s for GPT-2 124M's 124M values on one core); this one is the
// same everywhere up to the last bit of libm's double log, rounded to float, and needs no
// sin or cos (glibc's double sincos cost more than the rest of the draw together).
void fill_normal_block(float* out, int64_t n, float stddev, uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto symmetric = [&] { return double(int64_t(gen()) >> 11) * 0x1.0p-52; };  // [-1, 1)
  for (int64_t i = 0; i < n; i += 2) {
    double u, v, s;
    do {
      u = symmetric();
      v = symmetric();
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = double(stddev) * std::sqrt(-2.0 * std::log(s) / s);
    out[i] = float(u * f);
    if (i + 1 < n) out[i + 1] = float(v * f);
  }
}

}  // namespace

void init_normal(std::span<float> p, float stddev, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(p.size());
  const int64_t blocks = (n + kNormalBlock - 1) / kNormalBlock;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t at = b * kNormalBlock;
      fill_normal_block(p.data() + at, std::min(kNormalBlock, n - at), stddev, block_seed(seed, uint64_t(b)));
    }
  });
}

void init_constant(std::span<float> p, float value) { std::fill(p.begin(), p.end(), value); }

}  // namespace dpt
