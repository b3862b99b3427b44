#include "models/nn/layers/shape_layers.h"

#include "device/runtime.h"
#include "models/kernels/cpu/cpu_features.h"
#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cpu/parallel_for.h"

#include <algorithm>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace dpt {

MaxPool2d::MaxPool2d(const std::string& name, int64_t kernel, int64_t stride, int64_t padding)
    : Layer(name), k_(kernel), stride_(stride > 0 ? stride : kernel), pad_(padding) {
  if (kernel < 1 || padding < 0 || 2 * padding > kernel)
    throw std::invalid_argument(name + ": MaxPool2d needs kernel >= 1 and 0 <= padding <= kernel / 2");
}

namespace {

struct PoolGeometry {
  int64_t h, w, oh, ow, k, stride, pad;
};

// Planes [first, last) of max-pooling: per output row, the window's taps in row-major
// order, each over the row's outputs whose tap reads a real pixel: a branch-free select
// per output that vectorises, where a window at a time (its bounds clipped per output, a
// data-dependent branch per tap) runs at a branch miss per tap on post-ReLU data. Each
// output starts at -inf with its first real pixel as the winner; a tap takes over when it
// is greater, or NaN: the first maximum in row-major order, NaN propagating, as PyTorch's.
// kStride: the stride as a constant (strided loads vectorise), 0 for g.stride.
template <int64_t kStride>
[[gnu::always_inline]] inline void max_pool_planes(const PoolGeometry& g, const float* x, float* y, int32_t* argmax,
                                                   int64_t first, int64_t last, float* __restrict bv,
                                                   int32_t* __restrict bi) {
  const int64_t s = kStride > 0 ? kStride : g.stride, h = g.h, w = g.w, oh = g.oh, ow = g.ow, k = g.k, pad = g.pad;
  for (int64_t pl = first; pl < last; ++pl) {
    const float* __restrict src = x + pl * h * w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      const int64_t iy0 = std::max<int64_t>(oy * s - pad, 0);
      for (int64_t ox = 0; ox < ow; ++ox) {
        bv[ox] = -std::numeric_limits<float>::infinity();
        bi[ox] = static_cast<int32_t>(iy0 * w + std::max<int64_t>(ox * s - pad, 0));
      }
      for (int64_t ky = 0; ky < k; ++ky) {
        const int64_t iy = oy * s - pad + ky;
        if (iy < 0 || iy >= h) continue;
        for (int64_t kx = 0; kx < k; ++kx) {
          // Outputs ox whose tap kx reads column ix = ox*s - pad + kx in [0, w).
          const int64_t lo = std::max<int64_t>(0, (pad - kx + s - 1) / s);
          const int64_t past = w - 1 + pad - kx;  // may be negative: no output then
          const int64_t hi = past < 0 ? -1 : std::min<int64_t>(ow - 1, past / s);
          const int64_t base = iy * w - pad + kx;
          for (int64_t ox = lo; ox <= hi; ++ox) {
            const float v = src[base + ox * s];
            const bool take = (v > bv[ox]) | (v != v);  // no short-circuit: vectorises
            bv[ox] = take ? v : bv[ox];
            bi[ox] = take ? static_cast<int32_t>(base + ox * s) : bi[ox];
          }
        }
      }
      std::copy_n(bv, ow, y + (pl * oh + oy) * ow);
      std::copy_n(bi, ow, argmax + (pl * oh + oy) * ow);
    }
  }
}

template <int64_t kStride>
void max_pool_baseline(const PoolGeometry& g, const float* x, float* y, int32_t* argmax, int64_t first, int64_t last,
                       float* bv, int32_t* bi) {
  max_pool_planes<kStride>(g, x, y, argmax, first, last, bv, bi);
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same rule on AVX-512, 16 outputs of a row a vector: a tap's pixels gathered (the
// outputs it does not reach masked off), compared and selected in registers. Rows are
// short (8 outputs after ResNet's stem), too short for the compiler's vector loops.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void max_pool_avx512(
    const PoolGeometry& g, const float* x, float* y, int32_t* argmax, int64_t first, int64_t last, float*, int32_t*) {
  const int64_t s = g.stride, h = g.h, w = g.w, oh = g.oh, ow = g.ow, k = g.k, pad = g.pad;
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i even_lanes = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  // Per block of 16 outputs and tap column kx, the outputs the tap reaches (ox*s - pad + kx
  // in [0, w)), and for stride 2 the same spread to the even lanes of 32 pixels.
  thread_local std::vector<uint32_t> reach_masks, even_masks;
  reach_masks.assign(size_t((ow + 15) / 16 * k), 0);
  even_masks.assign(reach_masks.size(), 0);
  for (int64_t ox0 = 0; ox0 < ow; ox0 += 16)
    for (int64_t kx = 0; kx < k; ++kx)
      for (int64_t i = 0; i < std::min<int64_t>(16, ow - ox0); ++i) {
        const int64_t ix = (ox0 + i) * s - pad + kx;
        if (ix < 0 || ix >= w) continue;
        reach_masks[size_t((ox0 / 16) * k + kx)] |= 1u << i;
        even_masks[size_t((ox0 / 16) * k + kx)] |= 1u << (2 * i);
      }
  for (int64_t pl = first; pl < last; ++pl) {
    const float* src = x + pl * h * w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      const int64_t iy0 = std::max<int64_t>(oy * s - pad, 0);
      for (int64_t ox0 = 0; ox0 < ow; ox0 += 16) {
        const int64_t n = std::min<int64_t>(16, ow - ox0);
        const __m512i ox = _mm512_add_epi32(lane, _mm512_set1_epi32(int32_t(ox0)));
        const __m512i ox_s = _mm512_mullo_epi32(ox, _mm512_set1_epi32(int32_t(s)));
        // First real pixel of each window: (iy0, max(ox*s - pad, 0)).
        // (A masked max: the unmasked one trips GCC 12's maybe-uninitialized on its own header.)
        const __m512i ix0 = _mm512_maskz_max_epi32(__mmask16(0xffff), _mm512_sub_epi32(ox_s, _mm512_set1_epi32(int32_t(pad))),
                                                   _mm512_setzero_si512());
        __m512i bi = _mm512_add_epi32(_mm512_set1_epi32(int32_t(iy0 * w)), ix0);
        __m512 bv = minus_inf;
        for (int64_t ky = 0; ky < k; ++ky) {
          const int64_t iy = oy * s - pad + ky;
          if (iy < 0 || iy >= h) continue;
          for (int64_t kx = 0; kx < k; ++kx) {
            const uint32_t reach32 = reach_masks[size_t((ox0 / 16) * k + kx)];
            if (reach32 == 0) continue;
            const __mmask16 reach = __mmask16(reach32);
            const int64_t base = iy * w - pad + kx;
            const __m512i idx = _mm512_add_epi32(ox_s, _mm512_set1_epi32(int32_t(base)));
            __m512 v;
            if (s == 1) {  // contiguous: one masked load (masked-off lanes are not read)
              v = _mm512_maskz_loadu_ps(reach, src + base + ox0);
            } else if (s == 2) {  // every other pixel of 32: two masked loads, the even lanes kept
              const uint32_t even = even_masks[size_t((ox0 / 16) * k + kx)];
              const float* p0 = src + base + 2 * ox0;
              const __m512 a = _mm512_maskz_loadu_ps(__mmask16(even), p0);
              const __m512 b = _mm512_maskz_loadu_ps(__mmask16(even >> 16), p0 + 16);
              v = _mm512_permutex2var_ps(a, even_lanes, b);
            } else {
              v = _mm512_mask_i32gather_ps(minus_inf, reach, idx, src, 4);
            }
            const __mmask16 take =
                reach & (_mm512_cmp_ps_mask(v, bv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
            bv = _mm512_mask_mov_ps(bv, take, v);
            bi = _mm512_mask_mov_epi32(bi, take, idx);
          }
        }
        const __mmask16 out = __mmask16((1u << n) - 1);
        _mm512_mask_storeu_ps(y + (pl * oh + oy) * ow + ox0, out, bv);
        _mm512_mask_storeu_epi32(argmax + (pl * oh + oy) * ow + ox0, out, bi);
      }
    }
  }
}
#endif

using PoolKernel = void (*)(const PoolGeometry&, const float*, float*, int32_t*, int64_t, int64_t, float*, int32_t*);

PoolKernel pick_pool_kernel(int64_t stride, bool avx512) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (avx512) return max_pool_avx512;
#else
  (void)avx512;
#endif
  if (stride == 2) return max_pool_baseline<2>;
  if (stride == 1) return max_pool_baseline<1>;
  return max_pool_baseline<0>;
}

bool cpu_has_avx512_pool() {
  static const bool yes = [] {
    const CpuFeatures& f = cpu_features();
    return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  }();
  return yes;
}

}  // namespace

bool MaxPool2d::avx512_available() { return cpu_has_avx512_pool(); }

const Tensor& MaxPool2d::forward(const Tensor& in, const ForwardContext&) {
  if (in.rank() != 4)
    throw std::invalid_argument(name() + ": expected NCHW, got " + shape_to_string(in.shape()));
  x_ = &in;
  const int64_t planes = in.dim(0) * in.dim(1), h = in.dim(2), w = in.dim(3);
  if (h + 2 * pad_ < k_ || w + 2 * pad_ < k_)
    throw std::invalid_argument(name() + ": input " + shape_to_string(in.shape()) + " is smaller than the " +
                                std::to_string(k_) + "x" + std::to_string(k_) + " window");
  const int64_t oh = (h + 2 * pad_ - k_) / stride_ + 1, ow = (w + 2 * pad_ - k_) / stride_ + 1;
  y_.set_device(in.device());
  y_.resize({in.dim(0), in.dim(1), oh, ow});
  if (in.on_cuda()) {  // the argmax indices are int32, kept in a float-sized device array
    argmax_device_.reserve(static_cast<size_t>(planes * oh * ow));
    gpu::max_pool_forward(in.data(), y_.data(), reinterpret_cast<int32_t*>(argmax_device_.data()), int(planes), int(h),
                          int(w), int(oh), int(ow), int(k_), int(stride_), int(pad_));
    return y_;
  }
  argmax_.resize(static_cast<size_t>(planes * oh * ow));
  const float* x = in.data();
  float* y = y_.data();
  const PoolGeometry g{h, w, oh, ow, k_, stride_, pad_};
  const PoolKernel kernel = pick_pool_kernel(stride_, avx512_ && cpu_has_avx512_pool());
  int32_t* argmax = argmax_.data();
  parallel_for(planes, parallel_grain(oh * ow * k_ * k_), [&](int64_t first, int64_t last) {
    thread_local std::vector<float> best_value;  // the row's best so far, and where
    thread_local std::vector<int32_t> best_index;
    best_value.resize(static_cast<size_t>(ow));
    best_index.resize(static_cast<size_t>(ow));
    kernel(g, x, y, argmax, first, last, best_value.data(), best_index.data());
  });
  return y_;
}

const Tensor& MaxPool2d::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  dx_.resize_like(*x_);
  if (dout.on_cuda()) {  // every input written: the gradients of the outputs that took it
    gpu::max_pool_backward(dout.data(), reinterpret_cast<const int32_t*>(argmax_device_.data()), dx_.data(),
                           int(dout.dim(0) * dout.dim(1)), int(x_->dim(2)), int(x_->dim(3)), int(dout.dim(2)),
                           int(dout.dim(3)), int(k_), int(stride_), int(pad_));
    return dx_;
  }
  dx_.zero();
  const int64_t plane_in = x_->dim(2) * x_->dim(3);
  const int64_t plane_out = dout.dim(2) * dout.dim(3);
  const int64_t planes = dout.dim(0) * dout.dim(1);
  const float* dy = dout.data();
  float* dx = dx_.data();
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t i = 0; i < plane_out; ++i) {
      const int64_t o = pl * plane_out + i;
      dx[pl * plane_in + argmax_[o]] += dy[o];
    }
  return dx_;
}

const Tensor& Flatten::forward(const Tensor& in, const ForwardContext&) {
  in_shape_ = in.shape();
  const int64_t n = in.rank() ? in.dim(0) : 1;
  y_.set_device(in.device());
  y_.resize({n, static_cast<int64_t>(in.numel()) / std::max<int64_t>(n, 1)});
  if (in.on_cuda()) device::copy_on_kernel_stream(y_.data(), in.data(), in.numel() * sizeof(float));
  else std::copy(in.data(), in.data() + in.numel(), y_.data());
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dout, GradSink&, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  dx_.set_device(dout.device());
  dx_.resize(in_shape_);
  if (dout.on_cuda()) device::copy_on_kernel_stream(dx_.data(), dout.data(), dout.numel() * sizeof(float));
  else std::copy(dout.data(), dout.data() + dout.numel(), dx_.data());
  return dx_;
}

}  // namespace dpt
