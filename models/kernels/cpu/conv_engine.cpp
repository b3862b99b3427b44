#include "models/kernels/cpu/conv_engine.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "models/kernels/cpu/gemm_engine.h"
#include "models/kernels/cpu/conv2d_onednn.h"

namespace dpt {

ConvSetting parse_conv_setting(std::string_view value) {
  if (value.empty() || value == "auto") return ConvSetting::automatic;
  if (value == "im2col") return ConvSetting::im2col;
  if (value == "onednn") {
    if (!onednn_conv_available())
      throw std::invalid_argument("DPT_CONV=onednn: this build has no oneDNN (install libdnnl-dev and "
                                  "reconfigure), or use DPT_CONV=im2col");
    return ConvSetting::onednn;
  }
  throw std::invalid_argument("DPT_CONV=" + std::string(value) + ": expected im2col, onednn or auto");
}

ConvSetting conv_setting() {
  static const ConvSetting s = [] {
    const char* v = std::getenv("DPT_CONV");
    return parse_conv_setting(v ? v : "");
  }();
  return s;
}

bool onednn_conv_impl_is_jit(std::string_view impl) {
  return impl.rfind("jit", 0) == 0 || impl.rfind("brg", 0) == 0;
}

bool onednn_conv_shape_wins(int64_t in_channels, int64_t kernel, int64_t stride, bool all_taps_live,
                            int64_t out_pixels, bool bf16) {
  if (in_channels < 16 || !all_taps_live) return false;
  if (!bf16) return out_pixels >= kOnednnMinPixelsF32;
  const bool strided_1x1 = kernel == 1 && stride > 1;
  return !strided_1x1 && out_pixels >= kOnednnMinPixelsBf16;
}

std::string conv_engine_description() {
  switch (conv_setting()) {
    case ConvSetting::im2col: return "conv: im2col + sgemm [DPT_CONV=im2col]";
    case ConvSetting::onednn: return "conv: oneDNN " + onednn_version() + " convolution primitives [DPT_CONV=onednn]";
    case ConvSetting::automatic: break;
  }
  if (!onednn_conv_available()) return "conv: im2col + sgemm [auto: no oneDNN in this build]";
  return "conv: oneDNN " + onednn_version() + " " + onednn_isa_name() +
         " JIT kernels on convolutions of >= 16 channels, all taps live, >= " +
         std::to_string(kOnednnMinPixelsF32) + " output pixels (bf16: >= " + std::to_string(kOnednnMinPixelsBf16) +
         ", not 1x1 strided); else im2col + sgemm [auto]";
}

}  // namespace dpt
