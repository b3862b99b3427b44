// init_normal (models/nn/init.h) on GPT-2 124M's parameter count, against what it replaced:
// one std::normal_distribution<float> over one std::mt19937_64 per parameter, drawn on
// one thread. Prints the seconds of each, best of 3. OPENBLAS_NUM_THREADS=1 (or a process
// sharing its cores with other ranks) gives init_normal one thread too.
//   build/bin/init_normal_speed [values]      (default 124439808, GPT-2 124M's parameters)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <vector>

#include "models/kernels/cpu/parallel_for.h"
#include "models/nn/init.h"

namespace {

void draw_one_by_one(std::span<float> p, float stddev, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  for (float& v : p) v = dist(gen);
}

template <class F>
double best_of_3(F f) {
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 124439808;
  std::vector<float> v(n);
  const double before = best_of_3([&] { draw_one_by_one(v, 0.02f, 1); });
  const double now = best_of_3([&] { dpt::init_normal(v, 0.02f, 1); });
  std::printf("%zu values: std::normal_distribution one by one %.2f s, init_normal %.2f s on %d thread(s): %.2fx\n", n,
              before, now, dpt::parallel_threads(), before / now);
}
