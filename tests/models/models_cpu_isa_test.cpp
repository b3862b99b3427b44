// DPT_MAX_CPU_ISA (device/cpu_isa.h): the values it takes, what each level leaves of the
// CPU's features, and, in whatever run this is (models_isa.<level> sets the variable),
// that nothing above the cap reaches our kernels or oneDNN.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "device/cpu_isa.h"
#include "models/kernels/cpu/cpu_features.h"
#include "models/kernels/cpu/gemm.h"
#include "models/kernels/cpu/gemm_choice.h"
#include "models/nn/layers/shape_layers.h"

using namespace dpt;

TEST_CASE("DPT_MAX_CPU_ISA: the levels by name, any case; anything else named in the error", "[cpu_isa]") {
  CHECK(parse_max_cpu_isa("sse") == CpuIsa::sse);
  CHECK(parse_max_cpu_isa("avx") == CpuIsa::avx);
  CHECK(parse_max_cpu_isa("AVX2") == CpuIsa::avx2);
  CHECK(parse_max_cpu_isa("avx512") == CpuIsa::avx512);
  CHECK(parse_max_cpu_isa("Avx512_BF16") == CpuIsa::avx512_bf16);
  CHECK(parse_max_cpu_isa("amx") == CpuIsa::amx);
  for (const char* bad : {"avx3", "avx512bf16", "AVX512_CORE", " avx2"}) {
    INFO(bad);
    try {
      parse_max_cpu_isa(bad);
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()) == "DPT_MAX_CPU_ISA='" + std::string(bad) +
                                         "' is not a CPU instruction-set level (expected one of sse, avx, avx2, "
                                         "avx512, avx512_bf16, amx)");
    }
  }
}

TEST_CASE("DPT_MAX_CPU_ISA: each level clears every feature above it", "[cpu_isa]") {
  CpuFeatures all;
  all.sse3 = all.avx = all.fma = all.f16c = all.avx2 = true;
  all.avx512f = all.avx512dq = all.avx512cd = all.avx512bw = all.avx512vl = true;
  all.avx512_vnni = all.avx512_bf16 = all.avx512_fp16 = true;
  all.amx_tile = all.amx_bf16 = all.amx_int8 = true;
  auto has = [](const CpuFeatures& f) {
    return std::string(f.sse3 ? "sse3 " : "") + (f.avx ? "avx " : "") + (f.fma ? "fma " : "") +
           (f.f16c ? "f16c " : "") + (f.avx2 ? "avx2 " : "") +
           (f.avx512f && f.avx512dq && f.avx512cd && f.avx512bw && f.avx512vl ? "avx512 "
            : f.avx512f || f.avx512dq || f.avx512cd || f.avx512bw || f.avx512vl ? "avx512? "
                                                                                 : "") +
           (f.avx512_vnni ? "vnni " : "") + (f.avx512_bf16 ? "bf16 " : "") + (f.avx512_fp16 ? "fp16 " : "") +
           (f.amx_tile && f.amx_bf16 && f.amx_int8 ? "amx" : f.amx_tile || f.amx_bf16 || f.amx_int8 ? "amx?" : "");
  };
  CHECK(has(capped_cpu_features(all, CpuIsa::sse)) == "sse3 ");
  CHECK(has(capped_cpu_features(all, CpuIsa::avx)) == "sse3 avx ");
  CHECK(has(capped_cpu_features(all, CpuIsa::avx2)) == "sse3 avx fma f16c avx2 ");
  CHECK(has(capped_cpu_features(all, CpuIsa::avx512)) == "sse3 avx fma f16c avx2 avx512 ");
  CHECK(has(capped_cpu_features(all, CpuIsa::avx512_bf16)) == "sse3 avx fma f16c avx2 avx512 vnni bf16 ");
  CHECK(has(capped_cpu_features(all, CpuIsa::amx)) == has(all));
  CHECK(capped_cpu_features(all, CpuIsa::avx2).fp32_level() == SimdLevel::avx2);
  CHECK(capped_cpu_features(all, CpuIsa::avx).fp32_level() == SimdLevel::avx);
  CHECK(capped_cpu_features(all, CpuIsa::sse).fp32_level() == SimdLevel::sse);
  // The cap only lowers: a level above the CPU's adds nothing.
  CpuFeatures avx2_cpu = capped_cpu_features(all, CpuIsa::avx2);
  CHECK(has(capped_cpu_features(avx2_cpu, CpuIsa::amx)) == has(avx2_cpu));
}

TEST_CASE("DPT_MAX_CPU_ISA: this run's cap reaches the features, the bf16 products and oneDNN", "[cpu_isa]") {
  const CpuIsa cap = max_cpu_isa();
  INFO("DPT_MAX_CPU_ISA level " << cpu_isa_name(cap) << "; " << bf16_gemm_description() << "; "
                                << gemm_engine_label(GemmEngine::onednn));
  const CpuFeatures& f = cpu_features();
  const CpuFeatures want = capped_cpu_features(detect_cpu_features(), cap);
  CHECK(f.avx == want.avx);
  CHECK(f.avx2 == want.avx2);
  CHECK(f.f16c == want.f16c);
  CHECK(f.avx512f == want.avx512f);
  CHECK(f.avx512_bf16 == want.avx512_bf16);
  CHECK(f.amx_bf16 == want.amx_bf16);
  if (cap < CpuIsa::avx512_bf16) CHECK_FALSE(bf16_gemm_native());
  if (cap < CpuIsa::avx512) CHECK_FALSE(MaxPool2d::avx512_available());
  // oneDNN's fp32 kernels at most at the capped features' level, unless its own variable
  // governs it.
  if (gemm_engine_available(GemmEngine::onednn) && !std::getenv("ONEDNN_MAX_CPU_ISA") &&
      !std::getenv("DNNL_MAX_CPU_ISA"))
    CHECK(onednn_isa_level(onednn_cpu_isa()) <= want.fp32_level());
}
