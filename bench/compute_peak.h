// compute_peak: the arithmetic peak of this CPU's vector units, measured, for
// physical_limits and gemm_engines to read GEMM figures against. Each kernel is compiled
// for its instruction set by a target attribute, so the file builds for any x86-64, and
// runs only where CPUID (models/kernels/cpu/cpu_features.h) says the CPU and OS allow it.
//
// Terms:
//   fp32 FMA zmm   12 independent chains of vfmadd (AVX-512, 16 floats): 32 flops each.
//   fp32 FMA ymm   the same with AVX2 + FMA (8 floats): 16 flops each.
//   bf16 dot zmm   12 chains of vdpbf16ps (AVX512-BF16): per fp32 lane a += x0*y0 + x1*y1,
//                  64 flops per instruction.
//   AMX bf16       6 tile accumulators, each tdpbf16ps 16x16 fp32 += 16x32 bf16 x 32x16 bf16:
//                  2*16*16*32 = 16384 flops per instruction. Linux needs a permission first
//                  (request_amx_permission).
// Twelve chains: an FMA's latency is 4 cycles and 2 issue per cycle, so at least 8
// independent ones keep both units busy. Values stay finite and normal (x = 0.999 x +
// 0.001 tends to 1), so no slow path is taken. threads > 1 runs one copy per thread; the
// GFLOP/s is all threads' together in the best 50 ms window of the run.
#pragma once

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "models/kernels/cpu/cpu_features.h"

namespace dpt::bench {

enum class Peak { fma_zmm, fma_ymm, bf16_dot_zmm, amx_bf16 };

inline const char* peak_name(Peak p) {
  switch (p) {
    case Peak::fma_zmm: return "fp32 FMA zmm (AVX-512)";
    case Peak::fma_ymm: return "fp32 FMA ymm (AVX2)";
    case Peak::bf16_dot_zmm: return "bf16 dot zmm (AVX512-BF16 vdpbf16ps)";
    case Peak::amx_bf16: return "bf16 AMX (tdpbf16ps)";
  }
  return "";
}

namespace peak_detail {

#define DPT_PEAK_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx512f"))) inline float fma_zmm(int64_t iters) {
  const __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f);
#define DPT_DECL(i) __m512 a##i = _mm512_set1_ps(float(i));
  DPT_PEAK_12(DPT_DECL)
#undef DPT_DECL
  for (int64_t it = 0; it < iters; ++it) {
#define DPT_STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
    DPT_PEAK_12(DPT_STEP)
#undef DPT_STEP
  }
  __m512 s = _mm512_setzero_ps();
#define DPT_SUM(i) s = _mm512_add_ps(s, a##i);
  DPT_PEAK_12(DPT_SUM)
#undef DPT_SUM
  alignas(64) float out[16];  // not _mm512_reduce_add_ps: g++ 12 warns inside it (-Wuninitialized)
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

__attribute__((target("avx2,fma"))) inline float fma_ymm(int64_t iters) {
  const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
#define DPT_DECL(i) __m256 a##i = _mm256_set1_ps(float(i));
  DPT_PEAK_12(DPT_DECL)
#undef DPT_DECL
  for (int64_t it = 0; it < iters; ++it) {
#define DPT_STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
    DPT_PEAK_12(DPT_STEP)
#undef DPT_STEP
  }
  __m256 s = _mm256_setzero_ps();
#define DPT_SUM(i) s = _mm256_add_ps(s, a##i);
  DPT_PEAK_12(DPT_SUM)
#undef DPT_SUM
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0] + out[7];
}

__attribute__((target("avx512f,avx512bf16"))) inline float bf16_dot_zmm(int64_t iters) {
  // x = 2^-12 and y = 0.5 in every bf16 slot: each instruction adds 2^-12 per lane.
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f / 4096), _mm512_set1_ps(1.0f / 4096));
  const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.5f));
#define DPT_DECL(i) __m512 a##i = _mm512_set1_ps(float(i));
  DPT_PEAK_12(DPT_DECL)
#undef DPT_DECL
  for (int64_t it = 0; it < iters; ++it) {
#define DPT_STEP(i) a##i = _mm512_dpbf16_ps(a##i, x, y);
    DPT_PEAK_12(DPT_STEP)
#undef DPT_STEP
  }
  __m512 s = _mm512_setzero_ps();
#define DPT_SUM(i) s = _mm512_add_ps(s, a##i);
  DPT_PEAK_12(DPT_SUM)
#undef DPT_SUM
  alignas(64) float out[16];  // not _mm512_reduce_add_ps: g++ 12 warns inside it (-Wuninitialized)
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

#undef DPT_PEAK_12

#if defined(__x86_64__)
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-bf16"))) inline float amx_bf16(int64_t iters) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;  // 16 rows x 64 bytes, every tile
  alignas(64) uint16_t x[16 * 32], y[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) x[i] = 0x3980, y[i] = 0x3f00;  // bf16 2^-12 and 0.5
  alignas(64) float out[16 * 16];
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_loadd(6, x, 64);
  _tile_loadd(7, y, 64);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 6, 7);
    _tile_dpbf16ps(1, 6, 7);
    _tile_dpbf16ps(2, 6, 7);
    _tile_dpbf16ps(3, 6, 7);
    _tile_dpbf16ps(4, 6, 7);
    _tile_dpbf16ps(5, 6, 7);
  }
  _tile_stored(5, out, 64);
  _tile_release();
  return out[0];
}
#endif

// Runs call() on `threads` threads for `seconds` and returns the calls completed per
// second in the best 50 ms window (on a shared machine, the least disturbed one: the
// peak is what the hardware does, not what the neighbours leave).
template <class F>
double calls_per_second(int threads, double seconds, F call) {
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::atomic<uint64_t> calls{0};
  std::vector<float> sink(threads, 0.0f);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      float s = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        s += call();
        calls.fetch_add(1, std::memory_order_relaxed);
      }
      sink[t] = s;
    });
  while (ready.load() < threads) std::this_thread::yield();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto t_prev = start;
  uint64_t c_prev = calls.load();
  double best = 0;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto t_now = Clock::now();
    const uint64_t c_now = calls.load();
    const double rate = double(c_now - c_prev) / std::chrono::duration<double>(t_now - t_prev).count();
    if (rate > best) best = rate;
    t_prev = t_now, c_prev = c_now;
  } while (std::chrono::duration<double>(t_prev - start).count() < seconds);
  stop = true;
  for (auto& th : pool) th.join();
  volatile float keep = 0;  // the kernels' results stay observable
  for (float s : sink) keep = keep + s;
  return best;
}

}  // namespace peak_detail

// Whether this CPU and OS run the kernel (AMX: also whether Linux granted the permission).
inline bool peak_supported(Peak p) {
  const CpuFeatures& f = cpu_features();
  switch (p) {
    case Peak::fma_zmm: return f.avx512f;
    case Peak::fma_ymm: return f.avx2 && f.fma;
    case Peak::bf16_dot_zmm: return f.avx512f && f.avx512_bf16;
    case Peak::amx_bf16: {
      static const bool granted = f.amx_tile && f.amx_bf16 && request_amx_permission();
      return granted;
    }
  }
  return false;
}

// GFLOP/s of kernel p on `threads` threads over `seconds`; 0 where not supported.
inline double peak_gflops(Peak p, int threads, double seconds) {
  if (!peak_supported(p)) return 0.0;
  using namespace peak_detail;
  // About half a millisecond per call, so stopping costs little.
  switch (p) {
    case Peak::fma_zmm:
      return 384.0 * (1 << 17) * calls_per_second(threads, seconds, [] { return fma_zmm(1 << 17); }) / 1e9;
    case Peak::fma_ymm:
      return 192.0 * (1 << 17) * calls_per_second(threads, seconds, [] { return fma_ymm(1 << 17); }) / 1e9;
    case Peak::bf16_dot_zmm:
      return 768.0 * (1 << 17) * calls_per_second(threads, seconds, [] { return bf16_dot_zmm(1 << 17); }) / 1e9;
    case Peak::amx_bf16:
#if defined(__x86_64__)
      return 6.0 * 16384 * (1 << 12) * calls_per_second(threads, seconds, [] { return amx_bf16(1 << 12); }) / 1e9;
#else
      return 0.0;
#endif
  }
  return 0.0;
}

// The fp32 FMA peak at `threads`: the faster of zmm and ymm (CPUs with one 512-bit FMA
// unit run ymm as fast).
inline double fp32_peak_gflops(int threads, double seconds) {
  const double zmm = peak_gflops(Peak::fma_zmm, threads, seconds);
  const double ymm = peak_gflops(Peak::fma_ymm, threads, seconds);
  return zmm > ymm ? zmm : ymm;
}

}  // namespace dpt::bench
