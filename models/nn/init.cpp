#include "models/nn/init.h"

#include <algorithm>
#include <random>

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

void init_normal(std::span<float> p, float stddev, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  for (float& v : p) v = dist(gen);
}

void init_constant(std::span<float> p, float value) { std::fill(p.begin(), p.end(), value); }

}  // namespace dpt
