// Conv2d on each kernel this build has (im2col + sgemm; oneDNN's convolution primitives,
// fp32 and, on a CPU with native bf16, bf16) against a float64 direct convolution:
// forward, dx and dw (added onto a gradient that is not zero), over ResNet's shapes.
//
// Bounds, per element, with mag = the sum of |terms| of its float64 sum and n_terms their
// number (C*K*K for y, OC*K*K for dx, N*OH*OW for dw):
//   fp32  (n_terms + 3) * FLT_EPSILON * mag: fp32 sums in any order (Higham's gamma_n with
//         a factor 2 to spare; FLT_EPSILON is twice the unit roundoff).
//   bf16  plus (2^-7 + 2^-16) * mag: each of a product's two operands rounded to bf16 is
//         off by 2^-8 relative at most (8 significant bits: half an ulp is 2^-8 of the
//         smallest value of a binade), so the product by 2^-8 + 2^-8 + 2^-16.
//   dw    plus (FLT_EPSILON / 2) * |dw before|: the one rounding of the addition onto it.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <iomanip>
#include <string>
#include <vector>

#include "models/kernels/cpu/gemm.h"
#include "models/nn/layers/conv2d.h"
#include "models_test_util.h"

using namespace dpt;
using dpt::testing::fill_random;

namespace {

struct Shape {
  const char* what;
  int64_t n, c, h, w, oc, k, stride, pad;
  bool bias;
};

struct Ref {
  std::vector<double> value, mag;
  int64_t n_terms = 0;
};

struct Refs {
  Ref y, dx, dw;
};

Refs direct_conv(const Shape& s, int64_t oh, int64_t ow, const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>& b, const std::vector<float>& dy) {
  Refs r;
  r.y.value.assign(size_t(s.n * s.oc * oh * ow), 0.0);
  r.y.mag = r.y.value;
  r.dx.value.assign(x.size(), 0.0);
  r.dx.mag = r.dx.value;
  r.dw.value.assign(w.size(), 0.0);
  r.dw.mag = r.dw.value;
  r.y.n_terms = s.c * s.k * s.k + (s.bias ? 1 : 0);
  r.dx.n_terms = s.oc * s.k * s.k;
  r.dw.n_terms = s.n * oh * ow;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.oc; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const size_t yi = size_t(((n * s.oc + o) * oh + oy) * ow + ox);
          if (s.bias) r.y.value[yi] = b[size_t(o)], r.y.mag[yi] = std::fabs(b[size_t(o)]);
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t ky = 0; ky < s.k; ++ky)
              for (int64_t kx = 0; kx < s.k; ++kx) {
                const int64_t iy = oy * s.stride - s.pad + ky, ix = ox * s.stride - s.pad + kx;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                const size_t xi = size_t(((n * s.c + c) * s.h + iy) * s.w + ix);
                const size_t wi = size_t(((o * s.c + c) * s.k + ky) * s.k + kx);
                const double xw = double(x[xi]) * w[wi], dyw = double(dy[yi]) * w[wi], dyx = double(dy[yi]) * x[xi];
                r.y.value[yi] += xw, r.y.mag[yi] += std::fabs(xw);
                r.dx.value[xi] += dyw, r.dx.mag[xi] += std::fabs(dyw);
                r.dw.value[wi] += dyx, r.dw.mag[wi] += std::fabs(dyx);
              }
        }
  return r;
}

// Largest |got - ref| / bound over the elements (<= 1 passes); `base` is what got started from.
double worst(const float* got, const Ref& ref, bool bf16, const std::vector<float>* base, size_t& where) {
  double w = 0;
  for (size_t i = 0; i < ref.value.size(); ++i) {
    const double before = base ? (*base)[i] : 0.0;
    double bound = (double(ref.n_terms) + 3) * FLT_EPSILON * ref.mag[i] + FLT_EPSILON / 2 * std::fabs(before);
    if (bf16) bound += (std::ldexp(1.0, -7) + std::ldexp(1.0, -16)) * ref.mag[i];
    const double err = std::fabs(double(got[i]) - (before + ref.value[i]));
    const double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0.0);
    if (ratio > w) w = ratio, where = i;
  }
  return w;
}

const Shape kShapes[] = {
    {"3x3/1 pad 1", 2, 16, 6, 5, 32, 3, 1, 1, false},
    {"3x3/2 pad 1", 2, 32, 7, 8, 16, 3, 2, 1, false},
    {"1x1/2 downsample, even size", 3, 32, 6, 6, 64, 1, 2, 0, false},
    {"7x7/2 pad 3 stem", 2, 3, 12, 11, 16, 7, 2, 3, false},
    {"3x3 pad 1 on 1x1: dead taps", 4, 32, 1, 1, 32, 3, 1, 1, false},
    {"3x3/2 pad 1 on 2x2: dead taps", 2, 16, 2, 2, 32, 3, 2, 1, false},
    {"batch 1, bias", 1, 16, 5, 5, 16, 3, 1, 1, true},
    {"chunks of 8 samples, the last partial", 10, 16, 8, 8, 16, 3, 1, 1, false},
};

// kept_columns: im2col's backward on the columns its forward kept, or gathering them again.
void check_kernel(ConvSetting setting, bool bf16, bool kept_columns = true) {
  for (const Shape& s : kShapes) {
    DYNAMIC_SECTION(s.what) {
      ParamStore store;
      Conv2d conv(store, "conv", s.c, s.oc, s.k, s.stride, s.pad, s.bias);
      conv.set_conv_setting(setting);
      if (!kept_columns) conv.set_kept_columns_bytes(0);
      store.finalize();
      conv.init_params(store, 3);
      Tensor x({s.n, s.c, s.h, s.w});
      fill_random(x.span(), 11);
      const GemmPrecisionScope precision(bf16 ? GemmPrecision::bf16 : GemmPrecision::f32);
      const Tensor& y = conv.forward(x, ForwardContext{nullptr, true});
      const std::string kernel = conv.kernel();
      INFO("kernel: " << kernel << (bf16 ? ", bf16" : ", fp32"));
      if (setting == ConvSetting::onednn) REQUIRE(kernel.rfind("onednn", 0) == 0);
      if (setting == ConvSetting::im2col) REQUIRE(kernel == "im2col");
      const int64_t oh = y.dim(2), ow = y.dim(3);
      Tensor dy(y.shape());
      fill_random(dy.span(), 12);
      const size_t wi = conv.used_params()[0];
      std::vector<float> w(store.param_span(wi).begin(), store.param_span(wi).end()), b;
      if (s.bias) b.assign(store.param_span(conv.used_params()[1]).begin(), store.param_span(conv.used_params()[1]).end());
      std::vector<float> dw0(w.size());
      fill_random(dw0, 13, -0.5f, 0.5f);  // backward adds onto the gradient
      std::copy(dw0.begin(), dw0.end(), store.grad_span(wi).begin());
      GradSink sink;
      sink.begin(std::vector<int>(store.infos().size(), 1), nullptr);
      const Tensor& dx = conv.backward(dy, sink, true);
      const Refs ref = direct_conv(s, oh, ow, std::vector<float>(x.span().begin(), x.span().end()), w, b,
                                   std::vector<float>(dy.span().begin(), dy.span().end()));
      size_t at = 0;
      const double wy = worst(y.data(), ref.y, bf16, nullptr, at);
      INFO("y: worst error / bound " << wy << " at " << at);
      CHECK(wy <= 1.0);
      const double wx = worst(dx.data(), ref.dx, bf16, nullptr, at);
      INFO("dx: worst error / bound " << wx << " at " << at);
      CHECK(wx <= 1.0);
      const double ww = worst(store.grad(wi), ref.dw, bf16, &dw0, at);
      INFO("dw: worst error / bound " << ww << " at " << at << std::setprecision(9) << " got " << store.grad(wi)[at] << " ref " << ref.dw.value[at] + dw0[at] << " mag " << ref.dw.mag[at] << " before " << dw0[at]);
      CHECK(ww <= 1.0);
    }
  }
}

}  // namespace

TEST_CASE("Conv2d im2col: forward, dx, dw against float64", "[conv_kernels]") {
  SECTION("columns kept from forward") { check_kernel(ConvSetting::im2col, false); }
  SECTION("columns gathered again") { check_kernel(ConvSetting::im2col, false, false); }
}

// The cases below need a CPU feature or oneDNN. They are hidden ([.needs_...]) and each
// ctest that runs them starts through tests/support/cpu_has, which reports the test as
// Skipped, with the reason, where the machine lacks it; here they REQUIRE it, so a case
// that runs never passes on a path it was not written for (off native bf16 the products
// stay fp32, which a bf16 bound 2^-7 wide would let through unseen).
#define REQUIRE_NATIVE_BF16() \
  do {                                                                        \
    INFO("needs native bf16 (AMX-BF16 or AVX512-BF16) and oneDNN: " << bf16_gemm_description()); \
    REQUIRE(bf16_gemm_native());                                              \
  } while (0)

TEST_CASE("Conv2d im2col bf16: forward, dx, dw against float64 with bf16 rounding", "[.needs_bf16][conv]") {
  // Its operands are converted once and shared between products.
  REQUIRE_NATIVE_BF16();
  SECTION("columns kept from forward") { check_kernel(ConvSetting::im2col, true); }
  SECTION("columns gathered again") { check_kernel(ConvSetting::im2col, true, false); }
}

TEST_CASE("Conv2d oneDNN fp32: forward, dx, dw against float64", "[.needs_onednn][conv]") {
  INFO("needs oneDNN in the build (libdnnl-dev)");
  REQUIRE(onednn_conv_available());
  check_kernel(ConvSetting::onednn, false);
}

TEST_CASE("Conv2d oneDNN bf16: forward, dx, dw against float64 with bf16 rounding", "[.needs_bf16][conv]") {
  REQUIRE_NATIVE_BF16();
  REQUIRE(onednn_conv_available());
  check_kernel(ConvSetting::onednn, true);
}

// Guards the bf16 tests above against passing on fp32 arithmetic: the forward of a bf16
// convolution misses the fp32 bound.
static void check_bf16_rounding(ConvSetting setting) {
  const Shape s = kShapes[0];
  ParamStore store;
  Conv2d conv(store, "conv", s.c, s.oc, s.k, s.stride, s.pad, false);
  conv.set_conv_setting(setting);
  store.finalize();
  conv.init_params(store, 3);
  Tensor x({s.n, s.c, s.h, s.w});
  fill_random(x.span(), 11);
  const GemmPrecisionScope precision(GemmPrecision::bf16);
  const Tensor& y = conv.forward(x, ForwardContext{nullptr, true});
  std::vector<float> w(store.param_span(0).begin(), store.param_span(0).end());
  std::vector<float> dy(y.numel(), 0.0f);
  const Refs ref = direct_conv(s, y.dim(2), y.dim(3), std::vector<float>(x.span().begin(), x.span().end()), w, {}, dy);
  size_t at = 0;
  CHECK(worst(y.data(), ref.y, false, nullptr, at) > 1.0);
}

TEST_CASE("Conv2d oneDNN bf16: the bf16 rounding is there (an fp32 bound fails)", "[.needs_bf16][conv]") {
  REQUIRE_NATIVE_BF16();
  REQUIRE(onednn_conv_available());
  check_bf16_rounding(ConvSetting::onednn);
}

TEST_CASE("Conv2d im2col bf16: the bf16 rounding is there (an fp32 bound fails)", "[.needs_bf16][conv]") {
  REQUIRE_NATIVE_BF16();
  check_bf16_rounding(ConvSetting::im2col);
}

TEST_CASE("DPT_CONV: im2col, onednn, auto; anything else is refused by name", "[conv_kernels]") {
  CHECK(parse_conv_setting("") == ConvSetting::automatic);
  CHECK(parse_conv_setting("auto") == ConvSetting::automatic);
  CHECK(parse_conv_setting("im2col") == ConvSetting::im2col);
  if (onednn_conv_available()) CHECK(parse_conv_setting("onednn") == ConvSetting::onednn);
  else CHECK_THROWS_WITH(parse_conv_setting("onednn"), Catch::Contains("no oneDNN"));
  CHECK_THROWS_WITH(parse_conv_setting("cudnn"), Catch::Contains("DPT_CONV=cudnn: expected im2col, onednn or auto"));
}

namespace {
void check_auto_choice(bool bf16) {
  struct Case {
    const char* what;
    int64_t c, k, stride, pad, h, w;
    bool fp32, bf16;  // oneDNN expected (where the build has it; bf16 where native)
  };
  const Case cases[] = {
      {"64->64 3x3/1 on 8x8", 64, 3, 1, 1, 8, 8, true, true},
      {"64->64 5x5/1 pad 2 on 8x8", 64, 5, 1, 2, 8, 8, true, true},
      {"64->64 3x3/1 on 4x4: 16 output pixels", 64, 3, 1, 1, 4, 4, true, false},
      {"64->64 3x3/1 on 2x2: 4 output pixels", 64, 3, 1, 1, 2, 2, false, false},
      {"64->64 3x3/2 on 16x16: 8x8 output", 64, 3, 2, 1, 16, 16, true, true},
      {"64->64 3x3/2 on 8x8: 4x4 output", 64, 3, 2, 1, 8, 8, true, false},
      {"64->64 1x1/2 downsample on 16x16: 8x8 output", 64, 1, 2, 0, 16, 16, true, false},
      {"64->64 1x1/1 on 8x8", 64, 1, 1, 0, 8, 8, true, true},
      {"3->64 3x3/1 stem", 3, 3, 1, 1, 16, 16, false, false},
      {"64->64 3x3/1 pad 1 on 1x128: 6 of 9 taps dead", 64, 3, 1, 1, 1, 128, false, false},
  };
  {
    for (const Case& t : cases) {
      DYNAMIC_SECTION((bf16 ? "bf16 " : "fp32 ") << t.what) {
        ParamStore store;
        Conv2d conv(store, "conv", t.c, 64, t.k, t.stride, t.pad, false);
        conv.set_conv_setting(ConvSetting::automatic);
        store.finalize();
        conv.init_params(store, 3);
        Tensor x({2, t.c, t.h, t.w});
        fill_random(x.span(), 1);
        const GemmPrecisionScope precision(bf16 ? GemmPrecision::bf16 : GemmPrecision::f32);
        conv.forward(x, ForwardContext{nullptr, true});
        INFO("kernel: " << conv.kernel());
        const bool ran_onednn = conv.kernel().rfind("onednn", 0) == 0;
        CHECK(ran_onednn == ((bf16 ? t.bf16 : t.fp32) && onednn_conv_available()));
      }
    }
  }
}
}  // namespace

TEST_CASE("Conv2d auto: oneDNN on the shapes it measured faster on, fp32; im2col elsewhere", "[conv_kernels]") {
  check_auto_choice(false);
}

TEST_CASE("Conv2d auto: oneDNN on the shapes it measured faster on, bf16; im2col elsewhere", "[.needs_bf16][conv]") {
  REQUIRE_NATIVE_BF16();
  check_auto_choice(true);
}
