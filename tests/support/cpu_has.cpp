// cpu_has FEATURE... -- PROGRAM ARGS...: runs PROGRAM where this machine and build have
// every FEATURE, else prints which is missing and why and exits 77, which the ctests that
// start through it declare as SKIP_RETURN_CODE: a case written for a feature is reported
// Skipped where the feature is absent, never passed on another path. Features:
//   bf16_native    bf16 products on AMX-BF16 or AVX512-BF16 through oneDNN (bf16_gemm_native)
//   onednn_conv    oneDNN in the build, so Conv2d can run on it
//   avx512_pool    MaxPool2d's AVX-512 compilation can run on this CPU
//   gemm_by_size   sgemm() picks the engine by the product's size at one thread (auto's
//                  rule 2b, models/kernels/cpu/gemm_choice.h): not where DPT_GEMM pins one
//                  engine, oneDNN is missing or the two engines' instruction sets differ
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "models/kernels/cpu/conv2d_onednn.h"
#include "models/kernels/cpu/gemm.h"
#include "models/kernels/cpu/gemm_choice.h"
#include "models/nn/layers/shape_layers.h"

namespace {

// Empty where the feature is here; else why it is not.
std::string missing(const std::string& feature) {
  if (feature == "bf16_native") return dpt::bf16_gemm_native() ? "" : dpt::bf16_gemm_description();
  if (feature == "onednn_conv") return dpt::onednn_conv_available() ? "" : "no oneDNN in this build (libdnnl-dev)";
  if (feature == "avx512_pool") return dpt::MaxPool2d::avx512_available() ? "" : "no AVX-512 (F and BW) on this CPU";
  if (feature == "gemm_by_size") {
    const char* env = std::getenv("DPT_GEMM");
    const dpt::GemmChoice c = dpt::choose_gemm_engine(env ? env : "");
    return c.by_size_at_one_thread ? "" : "one engine at every size: " + c.how;
  }
  std::fprintf(stderr, "cpu_has: unknown feature '%s' (bf16_native, onednn_conv, avx512_pool, gemm_by_size)\n",
               feature.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int sep = 1;
  while (sep < argc && std::strcmp(argv[sep], "--") != 0) ++sep;
  if (sep == 1 || sep + 1 >= argc) {
    std::fprintf(stderr, "usage: cpu_has FEATURE... -- PROGRAM ARGS...\n");
    return 2;
  }
  bool all = true;
  for (int i = 1; i < sep; ++i) {
    const std::string why = missing(argv[i]);
    if (!why.empty()) {
      std::printf("cpu_has: skipped: %s is not here: %s\n", argv[i], why.c_str());
      all = false;
    }
  }
  if (!all) return 77;
  std::fflush(stdout);
  ::execv(argv[sep + 1], argv + sep + 1);
  std::perror(argv[sep + 1]);
  return 127;
}
