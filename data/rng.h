#pragma once
// Deterministic random numbers for data/: the same seed gives the same numbers on every
// platform and standard library. std::mt19937_64 is specified bit for bit by the C++
// standard, but std::uniform_int_distribution and std::normal_distribution are not, so
// the conversions to ranges and to normals are written out here.
#include <cstdint>
#include <random>

namespace dpt {

using Rng = std::mt19937_64;

// Uniform integer in [0, bound), bound > 0, by rejection: draws below 2^64 mod bound are
// rejected so every residue is equally likely (no modulo bias).
inline uint64_t uniform_below(Rng& rng, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // = 2^64 mod bound
  for (;;) {
    const uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

// Uniform double in [0, 1) from the top 53 bits.
inline double uniform01(Rng& rng) { return double(rng() >> 11) * 0x1.0p-53; }

// Standard normal by the Box-Muller transform (one draw per call, the second discarded
// so that the sequence does not depend on call parity).
double standard_normal(Rng& rng);

// Mixes a seed with a stream number into a well-spread seed (SplitMix64 finalizer), so
// nearby seeds (seed, seed + 1) give unrelated streams.
uint64_t mix_seed(uint64_t seed, uint64_t stream);

}  // namespace dpt
