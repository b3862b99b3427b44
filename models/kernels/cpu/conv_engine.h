// Which kernel runs a Conv2d: DPT_CONV=im2col|onednn|auto (default auto), read once.
//   im2col  models/nn/layers/conv2d.cpp: im2col + sgemm (sgemm's engine, DPT_GEMM).
//   onednn  models/kernels/cpu/conv2d_onednn.h: oneDNN's convolution primitives. Refused
//           (std::invalid_argument) in a build without oneDNN.
//   auto    per layer shape and precision: onednn where (1) oneDNN is in the build, (2) its
//           forward primitive for the shape is one of its JIT kernels for the CPU's ISA
//           (implementation "jit:..." or "brg...", chosen by oneDNN from CPUID; not its
//           "gemm:" im2col or "ref:" code), and (3) the shape is one oneDNN measured
//           faster on (docs/resnet.md "Convolution kernels"): at least 16 input channels,
//           every tap live, and an output of at least kOnednnMinPixelsF32 (4x4) pixels in
//           fp32; in bf16 at least kOnednnMinPixelsBf16 (8x8) and not a strided 1x1.
//           Elsewhere im2col: the 3-channel stem, the 2x2 and 1x1 outputs (backward up
//           to 7.5x slower in fp32, 15x in bf16), in bf16 the 4x4 outputs (2x) and the
//           strided 1x1 downsamples (1.5-2x) ran slower on oneDNN 2.6, and dead taps are
//           products im2col leaves out and oneDNN computes on padding.
//           The rule asks oneDNN what it runs and looks at the shape, never the CPU model.
// A shape oneDNN cannot run at all falls back to im2col under onednn too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dpt {

enum class ConvSetting { im2col, onednn, automatic };

// Parses one value ("" is auto); throws std::invalid_argument naming DPT_CONV otherwise.
ConvSetting parse_conv_setting(std::string_view value);
// DPT_CONV of this process, parsed at the first call.
ConvSetting conv_setting();
// auto's rule: (2) on oneDNN's forward implementation name, (3) on the shape.
bool onednn_conv_impl_is_jit(std::string_view impl);
inline constexpr int64_t kOnednnMinPixelsF32 = 16;
inline constexpr int64_t kOnednnMinPixelsBf16 = 64;
bool onednn_conv_shape_wins(int64_t in_channels, int64_t kernel, int64_t stride, bool all_taps_live,
                            int64_t out_pixels, bool bf16);
// One line for programs to print, e.g. "conv: oneDNN 2.6.3 avx512_core_amx JIT kernels on
// convolutions of >= 16 channels, ...; else im2col + sgemm [auto]".
std::string conv_engine_description();

}  // namespace dpt
