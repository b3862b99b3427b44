// Which engine (models/kernels/cpu/gemm_engine.h) sgemm() runs: DPT_GEMM=openblas|onednn|auto
// (default auto), read once, at the first product or the first gemm_engine() call. An
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
//      engine every earlier result was computed with.
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

inline constexpr double kMeasuredMargin = 1.3;
// Step 3's measurement: OpenBLAS's time over oneDNN's (> 1: oneDNN faster), one thread
// each (the kernels' speed; on every core each engine's idle threads spin-wait after a
// call and slow the other one down), interleaved round by round so a busy spell hits both,
// best of 3 rounds after a warm-up on NN 256x768x768, NT 256x768x768 and TN 768x768x256.
// 0 without oneDNN. It sets blas_threads() to 1 meanwhile.
double measure_onednn_speedup();

struct GemmChoice {
  GemmEngine engine = GemmEngine::openblas;
  // "DPT_GEMM=onednn", or auto's reason: "auto: openblas core Prescott is sse, onednn
  // avx512_core is avx512 (cpu: avx512)"
  std::string how;
};
// The rule for one value of DPT_GEMM ("" means auto); may measure (step 3).
GemmChoice choose_gemm_engine(std::string_view dpt_gemm);

// The engine sgemm() runs, chosen once from DPT_GEMM.
GemmEngine gemm_engine();
// What runs and why, for programs to print, e.g.
// "onednn 2.6.3 avx512_core_amx (avx512), 2 threads [auto: openblas core Prescott is sse,
// onednn avx512_core_amx is avx512 (cpu: avx512)]".
std::string gemm_engine_description();
// "openblas SkylakeX (avx512)" / "onednn 2.6.3 avx512_core_amx (avx512)".
std::string gemm_engine_label(GemmEngine e);

}  // namespace dpt
