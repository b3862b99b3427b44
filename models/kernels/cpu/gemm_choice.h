// Which engine (models/kernels/cpu/gemm_engine.h) sgemm() runs: DPT_GEMM=openblas|onednn|mkl|auto
// (default auto; auto never picks mkl, which only DPT_GEMM=mkl runs), read once, at the first product or the first gemm_engine() call. An
// engine that is not in the build, or another value, is an error (std::invalid_argument),
// never a silent fallback.
//
// auto decides by instruction set, and measures only where the instruction set cannot tell:
//   1. no oneDNN in the build: openblas.
//   2. Each engine's fp32 SimdLevel: OpenBLAS's from the core it runs (its own list of
//      kernel names, openblas_core_level; not a list of CPU models), oneDNN's from the ISA
//      it dispatches to. The engine on the lower level loses: that is the failure auto
//      exists for (Debian's OpenBLAS 0.3.21 runs Prescott, SSE3, kernels on Xeons whose
//      model number it does not know: ~4x slower than oneDNN on an AVX-512 Xeon; its
//      Haswell kernels there ~1.5x; bench/gemm_engines). On the same level: openblas, the
//      engine every earlier result was computed with, and at one product thread each
//      product by its size (2b).
//  2b. Same level and one product thread (a rank among others on its host: the launch
//      gives each 1 thread where ranks fill the cores): oneDNN for products of m*n*k >=
//      kOnednnMinProduct (2^20), OpenBLAS for smaller ones. On a grid of 1029 NN/NT/TN
//      shapes (m, n, k of 16..2048, `bench/gemm_engines --shapes grid --threads 1`, AVX-512
//      EPYC, OpenBLAS Cooperlake, oneDNN avx512_core_bf16) oneDNN's fixed cost per call
//      loses up to 4x on small products (16^3: 23 against 85 GFLOP/s) and its kernels win
//      ~10% on large ones (GPT's 2048x128x512: 115 against 102); either engine alone is
//      1.10x the per-shape best (geometric mean over the grid), this rule 1.02x, and 2^20
//      is the best single threshold (2^18: 1.04x, 2^22: 1.05x). Only at one thread: with
//      more, the two libraries' thread pools (OpenBLAS's pthreads, oneDNN's OpenMP team)
//      would spin against each other between products, so one engine runs them all.
//      The choice depends on the shape and the thread count only, so runs stay bitwise
//      reproducible.
//   3. A core name OpenBLAS has and this list has not (a newer OpenBLAS): both engines are
//      timed once (measure_onednn_speedup, about 0.1 s), and onednn is taken only if at
//      least kMeasuredMargin faster.
// Why not always measure, though it is cheap: it is not stable where it decides. At the
// same level the engines are within noise of each other (on the 2-core AVX-512/AMX Xeon
// this was written on, oneDNN ran the GPT-2 step's products at 0.9-1.3x OpenBLAS
// SkylakeX, 1.1x on the step's mix, with run-to-run swings of 10% and more under other
// jobs' load). A timed choice would then differ between runs and between the ranks of one
// job, and the engines round differently: a resumed run would no longer continue bit for
// bit, and two runs compared bit for bit would fail at random. The level rule gives one
// engine per machine and libraries, costs nothing, and catches what timing would (a level
// gap measures 1.4x and more, outside the noise); the margin keeps step 3 off the noise
// too. Pin DPT_GEMM where results must match bit for bit across machines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "models/kernels/cpu/cpu_features.h"
#include "models/kernels/cpu/gemm_engine.h"

namespace dpt {

// OpenBLAS's x86-64 core names (DYNAMIC_ARCH, 0.3.x) to the level of their sgemm kernels;
// unknown for a name not in the list.
SimdLevel openblas_core_level(std::string_view core);
// A dnnl_cpu_isa_t value (oneDNN's ISAs are bit sets, each containing the one below).
SimdLevel onednn_isa_level(int dnnl_cpu_isa);

// Step 2 alone: nullopt when either level is unknown.
std::optional<GemmEngine> choose_gemm_engine_by_level(SimdLevel openblas, SimdLevel onednn);
// Whether rule 2b applies: both levels known and the same (on different levels the lower
// engine loses at every size; unknown levels are measured, step 3).
bool gemm_by_size_on_levels(SimdLevel openblas, SimdLevel onednn);

inline constexpr double kMeasuredMargin = 1.3;
// Step 3's measurement: OpenBLAS's time over oneDNN's (> 1: oneDNN faster), one thread
// each (the kernels' speed; on every core each engine's idle threads spin-wait after a
// call and slow the other one down), interleaved round by round so a busy spell hits both,
// best of 3 rounds after a warm-up on NN 256x768x768, NT 256x768x768 and TN 768x768x256.
// 0 without oneDNN. It sets blas_threads() to 1 meanwhile.
double measure_onednn_speedup();

inline constexpr int64_t kOnednnMinProduct = int64_t(1) << 20;

struct GemmChoice {
  GemmEngine engine = GemmEngine::openblas;
  // Rule 2b: at one product thread, oneDNN for m*n*k >= kOnednnMinProduct (else `engine`).
  bool by_size_at_one_thread = false;
  // "DPT_GEMM=onednn", or auto's reason: "auto: openblas core Prescott is sse, onednn
  // avx512_core is avx512 (cpu: avx512)"
  std::string how;
};
// The rule for one value of DPT_GEMM ("" means auto); may measure (step 3).
GemmChoice choose_gemm_engine(std::string_view dpt_gemm);

// The process's engine, chosen once from DPT_GEMM (the only one where rule 2b is off).
GemmEngine gemm_engine();
// The engine sgemm() runs this m x n x k product on: gemm_engine(), or by rule 2b its size
// while this thread's products run on one thread.
GemmEngine gemm_engine_for(int m, int n, int k);
// Rule 2b's pick alone (no thread count): the engine for an m x n x k product.
GemmEngine gemm_engine_by_size(int64_t m, int64_t n, int64_t k);
// What runs and why, for programs to print, e.g.
// "onednn 2.6.3 avx512_core_amx (avx512), 2 threads [auto: openblas core Prescott is sse,
// onednn avx512_core_amx is avx512 (cpu: avx512)]", or at one thread under rule 2b
// "onednn ... on products of m*n*k >= 2^20, openblas ... below, 1 thread [auto: ...]".
std::string gemm_engine_description();
// "openblas SkylakeX (avx512)" / "onednn 2.6.3 avx512_core_amx (avx512)" / "mkl 2026.2".
std::string gemm_engine_label(GemmEngine e);

}  // namespace dpt
