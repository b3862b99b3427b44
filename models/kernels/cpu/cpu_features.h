// cpu_features: what this x86 CPU and its operating system let a program run, read from
// CPUID and XGETBV (never from the CPU's model number). An instruction set counts only
// when the CPU has it and the OS saves its registers: AVX needs XCR0's SSE+YMM bits,
// AVX-512 also the opmask/ZMM bits, AMX the tile-data bits (and on Linux a per-process
// permission, request_amx_permission()). cpu_features() reports them at most at
// DPT_MAX_CPU_ISA's level (device/cpu_isa.h). Header-only so bench programs that link
// nothing of dpt can use it. On other architectures every feature reads false.
//
// Terms:
//   SimdLevel   the widest fp32 FMA arithmetic an engine or CPU runs: sse (128-bit, no
//               FMA), avx (256-bit, no FMA), avx2 (256-bit with FMA), avx512 (512-bit FMA).
//               A GEMM's fp32 speed follows it: each level doubles the flops per cycle
//               of the one below (sse -> avx -> avx2 -> avx512).
#pragma once

#include <cstdint>

#include "device/cpu_isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dpt {

enum class SimdLevel { unknown = 0, sse = 1, avx = 2, avx2 = 3, avx512 = 4 };

inline const char* simd_level_name(SimdLevel l) {
  switch (l) {
    case SimdLevel::sse: return "sse";
    case SimdLevel::avx: return "avx";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx512: return "avx512";
    default: return "unknown";
  }
}

struct CpuFeatures {
  bool sse3 = false, avx = false, fma = false, f16c = false, avx2 = false;
  bool avx512f = false, avx512dq = false, avx512cd = false, avx512bw = false, avx512vl = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;  // CPU and OS; permission aside

  // The widest fp32 FMA level this CPU runs.
  SimdLevel fp32_level() const {
    if (avx512f) return SimdLevel::avx512;
    if (avx2 && fma) return SimdLevel::avx2;
    if (avx) return SimdLevel::avx;
    return SimdLevel::sse;
  }
};

inline CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  f.sse3 = ecx & (1u << 0);
  const bool osxsave = ecx & (1u << 27);
  const bool cpu_avx = ecx & (1u << 28), cpu_fma = ecx & (1u << 12);
  uint64_t xcr0 = 0;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (uint64_t{hi} << 32) | lo;
  }
  const bool os_ymm = (xcr0 & 0x6) == 0x6;             // SSE and AVX state
  const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;      // XTILECFG, XTILEDATA
  f.avx = cpu_avx && os_ymm;
  f.fma = cpu_fma && os_ymm;
  f.f16c = (ecx & (1u << 29)) && os_ymm;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const unsigned leaf7_max_sub = eax;
  f.avx2 = (ebx & (1u << 5)) && os_ymm;
  f.avx512f = (ebx & (1u << 16)) && os_zmm;
  f.avx512dq = (ebx & (1u << 17)) && os_zmm;
  f.avx512cd = (ebx & (1u << 28)) && os_zmm;
  f.avx512bw = (ebx & (1u << 30)) && os_zmm;
  f.avx512vl = (ebx & (1u << 31)) && os_zmm;
  f.avx512_vnni = (ecx & (1u << 11)) && os_zmm;
  f.avx512_fp16 = (edx & (1u << 23)) && os_zmm;
  f.amx_bf16 = (edx & (1u << 22)) && os_amx;
  f.amx_tile = (edx & (1u << 24)) && os_amx;
  f.amx_int8 = (edx & (1u << 25)) && os_amx;
  if (leaf7_max_sub >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    f.avx512_bf16 = (eax & (1u << 5)) && os_zmm;
  }
#endif
  return f;
}

// f without what lies above `cap` (device/cpu_isa.h's table).
inline CpuFeatures capped_cpu_features(CpuFeatures f, CpuIsa cap) {
  if (cap < CpuIsa::amx) f.amx_tile = f.amx_bf16 = f.amx_int8 = f.avx512_fp16 = false;
  if (cap < CpuIsa::avx512_bf16) f.avx512_bf16 = f.avx512_vnni = false;
  if (cap < CpuIsa::avx512) f.avx512f = f.avx512dq = f.avx512cd = f.avx512bw = f.avx512vl = false;
  if (cap < CpuIsa::avx2) f.avx2 = f.fma = f.f16c = false;
  if (cap < CpuIsa::avx) f.avx = false;
  return f;
}

// This CPU's features at most at DPT_MAX_CPU_ISA's level: every path that depends on
// them asks here, so the cap reaches them all.
inline const CpuFeatures& cpu_features() {
  static const CpuFeatures f = capped_cpu_features(detect_cpu_features(), max_cpu_isa());
  return f;
}

// Linux hands AMX tile data to a process only after it asks (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, since Linux 5.16); until then the first
// tile instruction faults. The permission covers every thread of the process.
inline bool request_amx_permission() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  if (!cpu_features().amx_tile) return false;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long bitmask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &bitmask) != 0) return false;
  return bitmask & (1ul << kXfeatureXtiledata);
#else
  return false;
#endif
}

}  // namespace dpt
