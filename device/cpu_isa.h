#pragma once
// DPT_MAX_CPU_ISA: the highest CPU instruction-set level dpt's own kernels may use, as
// oneDNN's ONEDNN_MAX_CPU_ISA is for oneDNN, so the paths written for lower levels run
// (and are tested) on any machine. Here, below comm/ and models/, because both have such
// paths (models/kernels/cpu/cpu_features.h applies it to every feature it reports; comm's
// reduce kernels ask it directly). Header-only: bench programs that link nothing of dpt
// read it through cpu_features.h.
//
// Levels, each with everything of the ones before it (and the CPU's OpenBLAS core, oneDNN
// ISA that runs the same):
//   sse          SSE up to SSE4.2, no AVX                 Prescott     sse41
//   avx          AVX, no FMA, F16C or AVX2 (Sandy Bridge) Sandybridge  avx
//   avx2         AVX2, FMA, F16C (Haswell, Zen 1-3)       Haswell      avx2
//   avx512       AVX-512 F/CD/BW/DQ/VL (Skylake-X)        SkylakeX     avx512_core
//   avx512_bf16  + VNNI, AVX512-BF16 (Cooper Lake, Zen 4) Cooperlake   avx512_core_bf16
//   amx          + AMX, AVX512-FP16: no cap (Sapphire Rapids)           avx512_core_amx
// Unset or empty means amx. The cap only lowers: a level above the CPU's changes nothing.
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dpt {

enum class CpuIsa { sse, avx, avx2, avx512, avx512_bf16, amx };

inline constexpr const char* kMaxCpuIsaVar = "DPT_MAX_CPU_ISA";
inline constexpr const char* kCpuIsaNames[] = {"sse", "avx", "avx2", "avx512", "avx512_bf16", "amx"};

inline const char* cpu_isa_name(CpuIsa l) { return kCpuIsaNames[static_cast<int>(l)]; }

// A DPT_MAX_CPU_ISA value (any case) as its level; std::invalid_argument naming the
// variable, the value and the accepted values for anything else.
inline CpuIsa parse_max_cpu_isa(std::string_view value) {
  std::string lower(value);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string accepted;
  for (int i = 0; i <= static_cast<int>(CpuIsa::amx); ++i) {
    if (lower == kCpuIsaNames[i]) return static_cast<CpuIsa>(i);
    accepted += (i ? ", " : "") + std::string(kCpuIsaNames[i]);
  }
  throw std::invalid_argument(std::string(kMaxCpuIsaVar) + "='" + std::string(value) +
                              "' is not a CPU instruction-set level (expected one of " + accepted + ")");
}

// The cap, read once (an invalid value throws at every call); amx when unset.
inline CpuIsa max_cpu_isa() {
  static const CpuIsa cap = [] {
    const char* v = std::getenv(kMaxCpuIsaVar);
    return v && *v ? parse_max_cpu_isa(v) : CpuIsa::amx;
  }();
  return cap;
}

}  // namespace dpt
